"""What retry safety costs the Redis driver (issue 9).

    python -m benchmarks.retry_cost [--messages N]

Starts one redis-server and prints, from Redis' own accounting (INFO
commandstats, MEMORY USAGE), so that a busy client machine does not skew
them: the script time per message of claim + delete and of pop, and the
memory each remembered deleted id and each kept claim result take. Compare
the script times with the same command on an older checkout.
"""

import argparse
import sys
import uuid

import redis

from localstack import backends
from localstack.redis_server import RedisServer
from zaqar_delay.drivers.redis import driver as redis_driver
from zaqar_delay.drivers.redis import keys

PROJECT = 'bench'
CLIENT = uuid.uuid4()


def script_us(raw):
    stats = raw.info('commandstats')
    return sum(v['usec'] for k, v in stats.items()
               if k.startswith('cmdstat_eval'))


def run(driver, raw, mode, total):
    queue = 'q-' + uuid.uuid4().hex[:8]
    driver.queue_controller.create(queue, project=PROJECT)
    for _ in range(total // 10):
        driver.message_controller.post(
            queue, [{'ttl': 3600, 'body': n} for n in range(10)], CLIENT,
            project=PROJECT)
    raw.config_resetstat()
    done = 0
    while done < total:
        if mode == 'pop':
            done += len(driver.message_controller.pop(queue, 10,
                                                      project=PROJECT))
        else:
            claim_id, messages = driver.claim_controller.create(
                queue, {'ttl': 300, 'grace': 60}, project=PROJECT, limit=10)
            for message in messages:
                driver.message_controller.delete(
                    queue, message['id'], project=PROJECT, claim=claim_id)
                done += 1
    return queue, script_us(raw) / total


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--messages', type=int, default=3000)
    args = parser.parse_args(argv)
    with RedisServer() as server:
        conf = backends.make_conf()
        conf.set_override('uri',
                          server.url.replace('redis://', 'delay.redis://'),
                          group='drivers:message_store:delay.redis')
        driver = redis_driver.DataDriver(
            conf, None, backends.control_driver(conf, server.url))
        raw = redis.Redis.from_url(server.url)
        for mode in ('claim+delete', 'pop'):
            queue, us = run(driver, raw, mode, args.messages)
            print('{:<14} {:7.1f} us of script time per message'.format(
                mode, us))
        prefix = keys.queue_prefix(queue, PROJECT)
        deleted = raw.memory_usage(prefix + ':deleted', samples=0)
        print('remembered deleted id: {:.0f} bytes each ({:,} ids)'.format(
            deleted / raw.zcard(prefix + ':deleted'),
            raw.zcard(prefix + ':deleted')))
        kept = [raw.memory_usage(k, samples=0)
                for k in raw.scan_iter(prefix.replace('{', '\\{')
                                       .replace('}', '\\}') + ':r:*')]
        print('kept pop result (10 messages): {:.0f} bytes each, for '
              '{:.0f} s'.format(sum(kept) / len(kept),
                                driver.retry_span_ms / 1000))


if __name__ == '__main__':
    sys.exit(main())
