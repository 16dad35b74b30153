"""How fast zaqar-delay-migrate moves Zaqar's Redis store into ours.

    python -m benchmarks.migrate [--messages 20000] [--batch 100]

Starts one redis-server, posts ``--messages`` messages (1 KB bodies,
100 queues) with Zaqar's own Redis driver, runs the command (in this
process, as ``zaqar-delay-migrate --source-uri ... --delete-source``
would) and prints messages/s and what that means for 1,000,000 messages.
The rate counts each message once, though the command reads it twice
(move, then verify and delete).
"""

import argparse
import io
import tempfile
import time
import uuid

from tests import backends
from tests.servers import zaqar_server
from tests.servers.redis_server import RedisServer
from zaqar_delay.migrate import cli

QUEUES = 100
BODY = {'payload': 'x' * 1000}


def fill(redis_url, messages):
    from zaqar.storage.redis import driver
    conf = backends.make_conf(**{'drivers:message_store:redis': {
        'uri': redis_url}})
    control = backends.control_driver(conf, redis_url)
    zaqar_redis = driver.DataDriver(conf, None, control)
    client = uuid.uuid4()
    per_queue = messages // QUEUES
    for n in range(QUEUES):
        control.queue_controller.create('q%d' % n, project='bench')
        for start in range(0, per_queue, 100):
            zaqar_redis.message_controller.post('q%d' % n, [
                {'ttl': 3600, 'body': dict(BODY, n=i)}
                for i in range(start, min(per_queue, start + 100))],
                client, project='bench')
    return per_queue * QUEUES


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--messages', type=int, default=20000)
    parser.add_argument('--batch', type=int, default=100)
    args = parser.parse_args()
    with RedisServer() as server, tempfile.TemporaryDirectory() as tmp:
        total = fill(server.url, args.messages)
        config = zaqar_server.write_config(
            tmp, server.url, 0, 'delay.redis',
            {'uri': server.url.replace('redis://', 'delay.redis://')})
        cli.logging.setup = lambda *a: None
        started = time.monotonic()
        code = cli.main(['--config-file', config, '--source-uri',
                         server.url, '--project-id', 'bench', '--batch',
                         str(args.batch), '--delete-source'],
                        out=io.StringIO())
        seconds = time.monotonic() - started
    rate = total / seconds
    print('moved {} messages (1 KB, {} queues) in {:.1f} s: {:.0f} '
          'messages/s (exit status {})'.format(total, QUEUES, seconds, rate,
                                               code))
    print('1,000,000 messages: about {:.0f} minutes'.format(
        1_000_000 / rate / 60))


if __name__ == '__main__':
    main()
