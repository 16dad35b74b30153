"""How fast zaqar-delay-migrate moves Zaqar's Redis or Swift store into
our Redis driver.

    python -m benchmarks.migrate [--source redis|swift] [--messages 20000]
                                 [--queues 100] [--batch 100]

Starts one redis-server (the management store and the target) and, for
``--source swift``, a single-node Swift; posts ``--messages`` messages
(1 KB bodies, spread over ``--queues`` queues) with Zaqar's own driver of
the source, runs the command (in this process, as ``zaqar-delay-migrate
--source-uri ... --delete-source`` would) and prints messages/s and what
that means for 1,000,000 messages. The rate counts each message once,
though the command reads it twice (move, then verify and delete).
"""

import argparse
import contextlib
import io
import tempfile
import time
import uuid

from localstack import backends
from localstack.factories import swift as swift_factory
from localstack import zaqar_server
from localstack.redis_server import RedisServer
from localstack.swift_server import SwiftServer
from zaqar_delay.migrate import cli

BODY = {'payload': 'x' * 1000}


def zaqar_driver(source, source_uri, redis_url):
    """Zaqar's own data driver of ``source`` (its Swift one through
    tempauth, as the command opens a ``?auth=v1`` URI)."""
    if source == 'redis':
        from zaqar.storage.redis.driver import DataDriver
    else:
        from zaqar_delay.migrate.swift_source import \
            TempauthDataDriver as DataDriver
    conf = backends.make_conf(**{'drivers:message_store:' + source: {
        'uri': source_uri}})
    control = backends.control_driver(conf, redis_url)
    return control, DataDriver(conf, None, control)


def fill(control, zaqar_store, messages, queues):
    client = uuid.uuid4()
    per_queue = messages // queues
    for n in range(queues):
        control.queue_controller.create('q%d' % n, project='bench')
        for start in range(0, per_queue, 100):
            zaqar_store.message_controller.post('q%d' % n, [
                {'ttl': 3600, 'body': dict(BODY, n=i)}
                for i in range(start, min(per_queue, start + 100))],
                client, project='bench')
    return per_queue * queues


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--source', choices=('redis', 'swift'),
                        default='redis')
    parser.add_argument('--messages', type=int, default=20000)
    parser.add_argument('--queues', type=int, default=100)
    parser.add_argument('--batch', type=int, default=100)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(RedisServer())
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        source_uri = server.url
        if args.source == 'swift':
            swift = stack.enter_context(SwiftServer())
            source_uri = swift_factory.swift_uri(swift).replace(
                'delay.swift://', 'swift://', 1)
        total = fill(*zaqar_driver(args.source, source_uri, server.url),
                     args.messages, args.queues)
        config = zaqar_server.write_config(
            tmp, server.url, 0, 'delay.redis',
            {'uri': server.url.replace('redis://', 'delay.redis://')})
        cli.logging.setup = lambda *a: None
        started = time.monotonic()
        code = cli.main(['--config-file', config, '--source-uri',
                         source_uri, '--project-id', 'bench', '--batch',
                         str(args.batch), '--delete-source'],
                        out=io.StringIO())
        seconds = time.monotonic() - started
    rate = total / seconds
    print('moved {} messages (1 KB, {} queues) from Zaqar\'s {} in {:.1f} '
          's: {:.0f} messages/s (exit status {})'.format(
              total, args.queues, args.source, seconds, rate, code))
    print('1,000,000 messages: about {:.0f} minutes'.format(
        1_000_000 / rate / 60))


if __name__ == '__main__':
    main()
