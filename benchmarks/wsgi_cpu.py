"""Zaqar's WSGI app called in this process: the API node's CPU per
message for each driver, with nothing else on the CPU.

    python -m benchmarks.wsgi_cpu [--requests N] [--rounds R]

``benchmarks.e2e`` measures the server's CPU per message on a real
``zaqar-server``, where three client processes and redis-server share the
two cores with it. Here one process builds Zaqar's WSGI app
(``zaqar.bootstrap``, as ``zaqar-server`` does) for each driver of e2e:
ours (``delay.redis``),
Zaqar's Redis driver and the in-memory ceiling (``bench.memory``), all on
one redis-server, and calls each app directly, without an HTTP server or
client. Per round and driver, on a fresh queue: N posts of 10 messages,
then claims of 10 (``?limit=10``) with the delete of each message
claimed until the queue is empty. The drivers take turns phase by phase.
This process's CPU time (``time.process_time``) per message handled is
what Zaqar's API layer and the driver spend in the API node, plus this
benchmark's own few steps per request (building each WSGI environment,
decoding each claim's answer): the same for all three, so the
differences are the drivers'. Python's cyclic garbage collector runs
before each phase, so that none inherits another's garbage.
redis-server's own work is not counted (e2e prints it). Prints the
median round of each and the ratios ours / Zaqar's and ours / ceiling.
"""

import argparse
import gc
import io
import json
import logging
import shutil
import statistics
import sys
import tempfile
import time
import uuid

from oslo_config import cfg
from zaqar import bootstrap

from benchmarks import e2e
from localstack import zaqar_server
from localstack.redis_server import RedisServer

PROJECT = 'bench-wsgi'
KINDS = ('post', 'claim+delete')
POST = json.dumps(e2e.batch(10, None)).encode()
CLAIM = json.dumps(e2e.CLAIM).encode()


class Api:
    """One driver's WSGI app, called with plain WSGI environments."""

    def __init__(self, config_path):
        conf = cfg.ConfigOpts()
        conf(args=[], project='zaqar', default_config_files=[config_path])
        self.app = bootstrap.Bootstrap(conf).transport.app
        self.headers = {'HTTP_CLIENT_ID': str(uuid.uuid4()),
                        'HTTP_X_PROJECT_ID': PROJECT}

    def call(self, method, href, body=b''):
        """(status code, body bytes)."""
        path, _, query = href.partition('?')
        environ = dict(self.headers, **{
            'REQUEST_METHOD': method, 'PATH_INFO': path,
            'QUERY_STRING': query, 'SERVER_NAME': '127.0.0.1',
            'SERVER_PORT': '80', 'SERVER_PROTOCOL': 'HTTP/1.1',
            'wsgi.url_scheme': 'http', 'wsgi.input': io.BytesIO(body),
            'wsgi.errors': sys.stderr, 'CONTENT_LENGTH': str(len(body)),
            'CONTENT_TYPE': 'application/json'})
        status = []
        answer = b''.join(self.app(
            environ, lambda line, headers, exc_info=None: status.append(
                line)))
        return int(status[0].split()[0]), answer

    def expect(self, code, method, href, body=b''):
        found, answer = self.call(method, href, body)
        if found != code:
            raise RuntimeError('{} {}: {} (expected {}): {}'.format(
                method, href, found, code, answer[:300]))
        return answer


def post_phase(api, queue, requests):
    for _ in range(requests):
        api.expect(201, 'POST', '/v2/queues/%s/messages' % queue, POST)
    return requests * 10


def claim_delete_phase(api, queue):
    handled = 0
    while True:
        code, answer = api.call(
            'POST', '/v2/queues/%s/claims?limit=10' % queue, CLAIM)
        if code == 204:
            return handled
        if code != 201:
            raise RuntimeError('claim: %d: %s' % (code, answer[:300]))
        for message in json.loads(answer)['messages']:
            api.expect(204, 'DELETE', message['href'])
            handled += 1


def measure(api, queue, kind, requests):
    """CPU milliseconds per message of one phase."""
    gc.collect()
    started = time.process_time()
    if kind == 'post':
        handled = post_phase(api, queue, requests)
    else:
        handled = claim_delete_phase(api, queue)
    if handled != requests * 10:
        raise RuntimeError('%s handled %d messages of %d' % (
            kind, handled, requests * 10))
    return 1000 * (time.process_time() - started) / handled


def build_apps(redis_url, directory):
    """{label: Api} for e2e's three drivers, all on ``redis_url``; the
    entry points of ``bench.memory`` are written into ``directory``, which
    must be on ``sys.path`` meanwhile."""
    e2e.ceiling_environment(directory)
    stores = {
        'ours': ('delay.redis',
                 {'uri': redis_url.replace('redis://', 'delay.redis://')}),
        'zaqar': ('redis', {'uri': redis_url}),
        'ceiling': (e2e.CEILING_STORE, {}),
    }
    apps = {}
    for label in e2e.LABELS:
        store, options = stores[label]
        config = tempfile.mkdtemp(dir=directory)
        apps[label] = Api(zaqar_server.write_config(
            config, redis_url, 0, store, options, max_delay=e2e.DELAY))
    return apps


def run(apps, requests, rounds):
    """{label: {kind: [ms per message, per round]}}."""
    spent = {label: {kind: [] for kind in KINDS} for label in apps}
    for label, api in apps.items():  # scripts loaded, imports done
        queue = 'warm-' + uuid.uuid4().hex[:8]
        measure(api, queue, 'post', 5)
        measure(api, queue, 'claim+delete', 5)
    for _ in range(rounds):
        queues = {label: 'cpu-' + uuid.uuid4().hex[:8] for label in apps}
        for kind in KINDS:
            for label, api in apps.items():
                spent[label][kind].append(
                    measure(api, queues[label], kind, requests))
    return spent


def report(spent, requests, rounds):
    medians = {label: {kind: statistics.median(runs)
                       for kind, runs in kinds.items()}
               for label, kinds in spent.items()}
    print('API node CPU per message (ms), median of %d round(s) of %d '
          'requests of 10' % (rounds, requests))
    print('{:<22}'.format('') + ''.join('{:>14}'.format(k) for k in KINDS))
    for label, row in medians.items():
        print('{:<22}'.format(label) + ''.join(
            '{:>14.4f}'.format(row[kind]) for kind in KINDS))
    for other in ('zaqar', 'ceiling'):
        print('{:<22}'.format('ratio ours / ' + other) + ''.join(
            '{:>13.2f}x'.format(e2e.divide(medians['ours'][kind],
                                           medians[other][kind]))
            for kind in KINDS))
    return medians


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--requests', type=int, default=500,
                        help='posts of 10 per phase (default 500)')
    parser.add_argument('--rounds', type=int, default=5,
                        help='rounds (default 5)')
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rounds < 1:
        parser.error('--requests and --rounds must be at least 1')
    # osprofiler logs a traceback when it finds no messaging driver.
    logging.getLogger('osprofiler').setLevel(logging.CRITICAL)
    directory = tempfile.mkdtemp(prefix='zd-wsgi-cpu-')
    sys.path.append(directory)
    try:
        with RedisServer() as redis:
            apps = build_apps(redis.url, directory)
            return report(run(apps, args.requests, args.rounds),
                          args.requests, args.rounds)
    finally:
        sys.path.remove(directory)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == '__main__':
    main()
