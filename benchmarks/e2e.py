"""End to end: a real zaqar-server per driver, driven over HTTP (issue 21).

    python -m benchmarks.e2e [--quick] [--delayed 100000] [--seconds 5]
        [--rounds 3] [--clients 3]

Starts one redis-server and three ``zaqar-server`` processes (Zaqar 23's
WSGI server, one request at a time), each with Zaqar's Redis control
driver on that redis-server and its own message store:

* ``ours``: ``delay.redis``, our Redis driver, on the same redis-server;
* ``zaqar``: Zaqar's own ``redis`` driver, on the same redis-server;
* ``ceiling``: ``bench.memory`` (benchmarks/memory_store.py), a few dicts
  in the server process, with a queue stage that answers Zaqar's
  metadata reads from the process as ours answers them from its copy;
  both registered as entry points in the servers' environment only (a
  ``.dist-info`` in a temporary directory on their PYTHONPATH): about
  the most any driver can give through Zaqar's API.

``--clients`` processes, each with its own ``requests`` session, run three
phases of ``--seconds`` each: ``post`` (10 messages per request),
``claim+delete`` (claims of 10, ``?limit=10``, each claimed message then
deleted by its href, with its claim id), and ``claim`` (claims of 10
left to expire: the claim alone, until the queue has none to give). The
drivers take turns phase by phase, ``--rounds`` times
(noise on a shared machine falls on all alike); throughput is the median
round, CPU per message the total over the rounds: the server process's
utime + stime (/proc/<pid>/stat) and redis-server's main thread (INFO
cpu), read before and after each phase.

Two scenarios: an empty queue, and a queue with ``--delayed`` messages
ahead, posted first on a queue whose ``_default_message_delay`` is 900 s
(Zaqar 23's v2 API takes a message's ``delay`` only on such a queue, on
every driver); the measured messages are then posted with ``"delay": 0``.
Prints the figures, the ratios ours / Zaqar's and ours / ceiling, and
whether each of the issue's targets is met.
"""

import argparse
import collections
import multiprocessing
import os
import shutil
import statistics
import tempfile
import time
import uuid

import redis as redis_py
import requests

from benchmarks.bounded import redis_cpu_ms
from localstack.redis_server import RedisServer
from localstack.zaqar_server import ZaqarServer

PROJECT = 'bench-e2e'
DELAY = 900
FILL_BATCH = 100
CLAIM = {'ttl': 300, 'grace': 60}
# claim (alone) last: its claims outlive the round, and it may empty the
# queue, which claim+delete would then find empty.
KINDS = ('post', 'claim+delete', 'claim')
# Ready messages posted (untimed) before each claims-alone phase: the
# claim+delete phase before it may have emptied the queue, and claims of
# nothing measure no message.
CLAIM_TOP_UP = 300
LABELS = ('ours', 'zaqar', 'ceiling')
CEILING_STORE = 'bench.memory'
# The store, and its queue stage (which answers Zaqar's metadata reads
# from the process, as ours answers them from the data store's copy).
CEILING_ENTRY_POINT = (
    '[zaqar.data.storage]\n{store} = {module}:DataDriver\n\n'
    '[{module}.queue.stages]\nmessage_queue_handler = {module}:QueueStage\n'
).format(store=CEILING_STORE, module='benchmarks.memory_store')
Phase = collections.namedtuple('Phase', 'messages seconds cpu redis_cpu')


def ceiling_environment(directory):
    """PYTHONPATH for a zaqar-server that finds ``bench.memory``: a
    distribution's metadata in ``directory``, declaring only its entry
    points, and this checkout (whose zaqar_delay the servers run too)."""
    info = os.path.join(directory, 'zaqar_delay_benchmarks-0.dist-info')
    os.mkdir(info)
    with open(os.path.join(info, 'METADATA'), 'w') as metadata:
        metadata.write('Metadata-Version: 2.1\nName: zaqar-delay-benchmarks'
                       '\nVersion: 0\n')
    with open(os.path.join(info, 'entry_points.txt'), 'w') as entry_points:
        entry_points.write(CEILING_ENTRY_POINT)
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = [directory, checkout] + [
        p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]
    return {'PYTHONPATH': os.pathsep.join(path)}


def start_servers(redis_url, environment):
    """{label: started ZaqarServer}. Posts of ``FILL_BATCH`` messages are
    allowed so that the delayed messages go in quickly; the measured
    posts carry 10."""
    stores = {
        'ours': ('delay.redis',
                 {'uri': redis_url.replace('redis://', 'delay.redis://')}),
        # Zaqar's default 0.1 s socket timeout cannot wait out its own
        # claim script scanning 100,000 delayed messages.
        'zaqar': ('redis', {'uri': redis_url + '?socket_timeout=120'}),
        'ceiling': (CEILING_STORE, {}),
    }
    servers = {}
    try:
        for label in LABELS:
            store, options = stores[label]
            servers[label] = ZaqarServer(
                redis_url, store, options, environment=environment,
                max_delay=DELAY,
                transport_options={'max_messages_per_page': FILL_BATCH})
            servers[label].start()
    except Exception:
        stop_servers(servers)
        raise
    return servers


def stop_servers(servers):
    for server in servers.values():
        server.stop()


def session():
    http = requests.Session()
    http.headers.update({'Client-ID': str(uuid.uuid4()),
                         'X-Project-ID': PROJECT})
    return http


def create_queue(url, name, metadata):
    response = session().put('%s/v2/queues/%s' % (url, name), json=metadata)
    assert response.status_code in (201, 204), response.text


def batch(size, delay):
    extra = {} if delay is None else {'delay': delay}
    return {'messages': [dict(ttl=3600, body={'n': n}, **extra)
                         for n in range(size)]}


def post_loop(http, url, queue, done, size, delay):
    response = http.post('%s/v2/queues/%s/messages' % (url, queue),
                         json=batch(size, delay))
    assert response.status_code == 201, response.text
    return done + size


def claim_loop(http, url, queue, done, delete):
    """One claim of 10, each message then deleted if ``delete``; None
    once the queue has nothing to claim."""
    response = http.post('%s/v2/queues/%s/claims?limit=10' % (url, queue),
                         json=CLAIM)
    if response.status_code == 204:
        return None
    assert response.status_code == 201, response.text
    messages = response.json()['messages']
    if not delete:
        return done + len(messages)
    for message in messages:
        deleted = http.delete(url + message['href'])
        assert deleted.status_code == 204, deleted.text
        done += 1
    return done


def client(url, queue, kind, deadline, quota, delay, results):
    """One client process: ``kind`` (one of ``KINDS``, or 'fill') until the
    deadline or ``quota`` messages, at least one request (a client
    started late on a loaded machine still measures something); puts the
    messages it handled."""
    http, done, steps = session(), 0, 0
    try:
        while done < quota and (not steps
                                or time.monotonic() < deadline):
            steps += 1
            if kind.startswith('claim'):
                step = claim_loop(http, url, queue, done,
                                  kind == 'claim+delete')
                if step is None:
                    break
                done = step
            else:
                size = min(FILL_BATCH, quota - done) if kind == 'fill' \
                    else 10
                done = post_loop(http, url, queue, done, size, delay)
    finally:
        results.put(done)


def process_cpu(pid):
    """utime + stime of process ``pid``, in seconds."""
    with open('/proc/%d/stat' % pid) as stat:
        fields = stat.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def run_clients(server, queue, kind, clients, seconds=None, quota=None,
                delay=None, raw=None):
    """Run ``clients`` client processes on ``server``; the messages they
    handled, the seconds, the server's and redis-server's CPU seconds."""
    context = multiprocessing.get_context('fork')
    results = context.Queue()
    quotas = ([quota // clients + (n < quota % clients)
               for n in range(clients)] if quota
              else [float('inf')] * clients)
    cpu, redis_ms = process_cpu(server.process.pid), redis_cpu_ms(raw)
    started = time.monotonic()
    deadline = started + seconds if seconds else float('inf')
    workers = [context.Process(target=client, args=(
        server.url, queue, kind, deadline, share, delay, results))
        for share in quotas]
    for worker in workers:
        worker.start()
    messages = sum(results.get() for _ in workers)
    for worker in workers:
        worker.join()
    if any(worker.exitcode for worker in workers):
        raise RuntimeError('a client failed on %s (%s)' % (queue, kind))
    return Phase(messages, time.monotonic() - started,
                 process_cpu(server.process.pid) - cpu,
                 (redis_cpu_ms(raw) - redis_ms) / 1000)


def scenario(servers, raw, args, delayed):
    """{label: {kind: [Phase per round]}} for one scenario: ``delayed``
    messages ahead (0: an empty queue)."""
    queues, delay = {}, None
    for label, server in servers.items():
        queues[label] = 'e2e-%s-%s' % (label, uuid.uuid4().hex[:8])
        create_queue(server.url, queues[label],
                     {'_default_message_delay': DELAY} if delayed else {})
        if delayed:
            delay = 0
            filled = run_clients(server, queues[label], 'fill', args.clients,
                                 quota=delayed, raw=raw)
            print('  %s: %d delayed messages posted in %.0f s' % (
                label, filled.messages, filled.seconds), flush=True)
    phases = {label: {kind: [] for kind in KINDS} for label in servers}
    for _ in range(args.rounds):
        for kind in KINDS:
            for label, server in servers.items():
                if kind == 'claim':
                    run_clients(server, queues[label], 'fill', args.clients,
                                quota=CLAIM_TOP_UP, delay=delay, raw=raw)
                phases[label][kind].append(run_clients(
                    server, queues[label], kind, args.clients,
                    seconds=args.seconds, delay=delay, raw=raw))
    return phases


def summary(phases):
    """{kind: (median messages/s, server CPU ms/message, redis CPU
    ms/message)} of one driver."""
    out = {}
    for kind, runs in phases.items():
        messages = sum(run.messages for run in runs)
        out[kind] = (statistics.median(run.messages / run.seconds
                                       for run in runs),
                     divide(1000 * sum(run.cpu for run in runs), messages),
                     divide(1000 * sum(run.redis_cpu for run in runs),
                            messages))
    return out


def divide(ours, theirs):
    """A ratio, NaN (never a target met) where the other measured 0."""
    return ours / theirs if theirs else float('nan')


COLUMNS = ((0, 'throughput, messages/s', '{:>14,.0f}'),
           (1, 'server CPU, ms/message', '{:>14.3f}'),
           (2, 'redis-server CPU, ms/message', '{:>14.3f}'))


def print_scenario(title, figures):
    print('\n#### %s' % title)
    ours = figures['ours']
    for column, heading, cell in COLUMNS:
        print('{:<22}'.format(heading) + ''.join(
            '{:>14}'.format(kind) for kind in KINDS))
        for label, row in figures.items():
            print('{:<22}'.format(label) + ''.join(
                cell.format(row[kind][column]) for kind in KINDS))
        for other in ('zaqar', 'ceiling'):
            print('{:<22}'.format('ratio ours / ' + other) + ''.join(
                '{:>13.2f}x'.format(divide(ours[kind][column],
                                           figures[other][kind][column]))
                for kind in KINDS))
    print(end='', flush=True)


def targets(empty, delayed, ahead):
    """The issue's targets as (wording, measured ratio, met)."""
    def ratio(figures, other, kind, column):
        return divide(figures['ours'][kind][column],
                      figures[other][kind][column])
    rows = [
        ('post throughput ours / ceiling, empty queue, >= 0.90',
         ratio(empty, 'ceiling', 'post', 0), lambda r: r >= 0.9),
        ('claim+delete throughput ours / ceiling, empty queue, >= 0.90',
         ratio(empty, 'ceiling', 'claim+delete', 0), lambda r: r >= 0.9),
        ('server CPU per message ours / zaqar, posts, <= 0.85',
         ratio(empty, 'zaqar', 'post', 1), lambda r: r <= 0.85),
        ('server CPU per message ours / zaqar, claim+delete, <= 0.75',
         ratio(empty, 'zaqar', 'claim+delete', 1), lambda r: r <= 0.75),
        ('claim throughput ours / zaqar, {:,} delayed ahead, '
         '>= 10'.format(ahead),
         ratio(delayed, 'zaqar', 'claim', 0), lambda r: r >= 10)]
    return [(text, value, check(value)) for text, value, check in rows]


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true',
                        help='5,000 delayed messages, 1 round of 2 s: '
                             'under about 2 minutes')
    parser.add_argument('--delayed', type=int,
                        help='delayed messages ahead (default 100,000; '
                             '5,000 with --quick)')
    parser.add_argument('--seconds', type=float,
                        help='seconds per phase (default 5; 2 with --quick)')
    parser.add_argument('--rounds', type=int,
                        help='rounds (default 3; 1 with --quick)')
    parser.add_argument('--clients', type=int, default=3,
                        help='client processes (default 3)')
    args = parser.parse_args(argv)
    defaults = (5000, 2, 1) if args.quick else (100000, 5, 3)
    for name, default in zip(('delayed', 'seconds', 'rounds'), defaults):
        if getattr(args, name) is None:
            setattr(args, name, default)
    directory = tempfile.mkdtemp(prefix='zd-e2e-')
    try:
        with RedisServer() as redis:
            raw = redis_py.Redis.from_url(redis.url)
            servers = start_servers(redis.url, ceiling_environment(directory))
            try:
                print('%d client processes, %d round(s) of %g s per phase; '
                      'load average %s' % (
                          args.clients, args.rounds, args.seconds,
                          ' '.join('%.1f' % v for v in os.getloadavg())),
                      flush=True)
                empty = {label: summary(phases) for label, phases in
                         scenario(servers, raw, args, 0).items()}
                print_scenario('empty queue', empty)
                print('\nfilling %s delayed messages per driver' % format(
                    args.delayed, ','), flush=True)
                delayed = {label: summary(phases) for label, phases in
                           scenario(servers, raw, args, args.delayed).items()}
                print_scenario('%s delayed messages ahead' % format(
                    args.delayed, ','), delayed)
            finally:
                stop_servers(servers)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print('\n#### targets (issue 21)')
    for text, value, met in targets(empty, delayed, args.delayed):
        print('{:<66} {:>7.3f}  {}'.format(text, value,
                                           'met' if met else 'NOT met'))


if __name__ == '__main__':
    main()
