"""What one store request costs, and where each driver's calls spend it.

    python -m benchmarks.request_cost [--backend redis|swift] [--calls N]

The figures behind the README's account of the targets not met, measured
side by side in one run:

* Redis: redis-server's own CPU (``INFO cpu``, user + system) per post of
  10 and per claim of 10 with its deletes, our driver against Zaqar's
  Redis driver on one server, taking turns.
* Swift: the Swift servers' CPU (every server process of the test Swift)
  per request of each kind, one request at a time on one container (and
  what X-Delete-At adds to a PUT and to that object's DELETE); then,
  for a post of 10 and for a claim of 10 with its deletes, the requests
  each driver sends, by kind (counted on its connection), what they come
  to at those prices, and the CPU measured for the call. The difference
  between priced and measured is what the prices leave out (listings of
  other sizes, a PUT's body size, a server's background work).
"""

import argparse
import collections
import time
import uuid

from benchmarks import run as pairs
from benchmarks import workloads
from localstack.redis_server import RedisServer

ROUNDS = 5
BATCH = [{'ttl': 3600, 'body': {'n': n, 'pad': 'x' * 64}} for n in range(10)]
KINDS = ('PUT', 'HEAD', 'GET', 'listing', 'POST', 'DELETE',
         'bulk-deleted object', 'other')
EXPIRING_PUT = 'PUT with X-Delete-At'
EXPIRING_DELETE = 'DELETE of one with it'
_KIND_OF = {'put_object': 'PUT', 'head_object': 'HEAD', 'get_object': 'GET',
            'get_container': 'listing', 'post_object': 'POST',
            'delete_object': 'DELETE'}


def kind_of(method, kwargs):
    """(kind, how many) of one swiftclient call: a bulk delete counts
    the objects it names."""
    if method == 'post_account' and kwargs.get('query_string') == \
            'bulk-delete':
        return 'bulk-deleted object', kwargs['data'].count(b'\n') + 1
    return _KIND_OF.get(method, 'other'), 1


def post_calls(driver, project, queue, calls):
    for _ in range(calls):
        driver.message_controller.post(queue, BATCH, workloads.CLIENT,
                                       project=project)


def spend(cpu_seconds, fn):
    before = cpu_seconds()
    fn()
    return cpu_seconds() - before


def per_call(cpu_seconds, driver, project, calls):
    """(CPU per post of 10, per claim of 10 with its deletes)."""
    queue = workloads.fresh_queue(driver, project)
    posting = spend(cpu_seconds,
                    lambda: post_calls(driver, project, queue, calls))
    taken = []
    draining = spend(cpu_seconds, lambda: taken.append(workloads.drain(
        driver, project, queue, 10 * calls)))
    return posting / calls, draining / (taken[0] / 10)


def print_ratio_rows(title, names, ours, theirs):
    print('\n{:<34} {:>14} {:>15} {:>8}'.format(
        title, 'zaqar-delay', 'zaqar built-in', 'ratio'))
    for name, a, b in zip(names, ours, theirs):
        print('{:<34} {:>11.3f} ms {:>12.3f} ms {:>7.2f}x'.format(
            name, a * 1000, b * 1000, a / b))


# -- Redis -----------------------------------------------------------------

def redis_cpu(client):
    info = client.info('cpu')
    return info['used_cpu_user'] + info['used_cpu_sys']


def redis_costs(url, calls, rounds=ROUNDS):
    import redis
    client = redis.Redis.from_url(url)
    ours, theirs = pairs.redis_pair(url)
    project = 'cost-' + uuid.uuid4().hex[:6]
    spent = {'ours': [], 'theirs': []}
    for _ in range(rounds):
        for who, driver in (('ours', ours), ('theirs', theirs)):
            spent[who].append(per_call(lambda: redis_cpu(client), driver,
                                       project, calls))
    mean = {who: [sum(s[i] for s in rows) / rounds for i in (0, 1)]
            for who, rows in spent.items()}
    print_ratio_rows('redis-server CPU per call',
                     ('post of 10', 'claim of 10 + its deletes'),
                     mean['ours'], mean['theirs'])


# -- Swift -----------------------------------------------------------------

class Tally:
    """Swift requests by kind, as kind_of() names them."""

    def __init__(self):
        self.counts = collections.Counter()

    def note(self, method, kwargs):
        kind, many = kind_of(method, kwargs)
        self.counts[kind] += many


def count_ours(driver, tally):
    store = driver.store
    original = store.call

    def call(method, *args, **kwargs):
        tally.note(method, kwargs)
        return original(method, *args, **kwargs)

    store.call = call


class CountingClient:
    """Zaqar's Swift driver's connection, each call noted in a Tally."""

    def __init__(self, client, tally):
        self._client, self._tally = client, tally

    def __getattr__(self, name):
        method = getattr(self._client, name)

        def counted(*args, **kwargs):
            self._tally.note(name, kwargs)
            return method(*args, **kwargs)
        return counted


def swift_prices(server, repeat):
    """The Swift servers' CPU seconds per request of each kind."""
    import swiftclient
    url, token = server.get_auth()
    conn = swiftclient.Connection(preauthurl=url, preauthtoken=token)
    container = 'prices-' + uuid.uuid4().hex[:6]
    conn.put_container(container)
    body = b'{"body": {"n": 1, "pad": "' + b'x' * 64 + b'"}, "ttl": 3600}'
    names = ['p/%020d' % n for n in range(repeat)]
    kept = ['k/%06d' % n for n in range(100)]
    for name in kept:
        conn.put_object(container, name, body)
    cpu = server.cpu_seconds

    def each(fn):
        return spend(cpu, lambda: [fn(n) for n in names]) / repeat

    prices = {
        'PUT': each(lambda n: conn.put_object(
            container, n, body, content_type='application/x-zd;id=1',
            headers={'If-None-Match': '*'})),
        'HEAD': each(lambda n: conn.head_object(container, n)),
        'GET': each(lambda n: conn.get_object(container, n)),
        'listing': each(lambda n: conn.get_container(
            container, prefix='k/', limit=100)),
        'POST': each(lambda n: conn.post_object(
            container, n, {'X-Object-Meta-Seen': '1'})),
    }
    doomed = [names[i:i + 10] for i in range(0, repeat, 20)]
    prices['bulk-deleted object'] = spend(cpu, lambda: [
        conn.post_account({'Content-Type': 'text/plain'},
                          query_string='bulk-delete',
                          data='\n'.join('/{}/{}'.format(container, n)
                                         for n in batch).encode())
        for batch in doomed]) / sum(len(b) for b in doomed)
    left = [n for i in range(10, repeat, 20) for n in names[i:i + 10]]
    prices['DELETE'] = spend(cpu, lambda: [
        conn.delete_object(container, n) for n in left]) / len(left)
    prices['other'] = prices['HEAD']
    # What Swift's expiry queue adds (one more container update each):
    # why a position carries no X-Delete-At (docs/swift.md, p/).
    expiring = {'X-Delete-At': str(int(time.time()) + 3600),
                'If-None-Match': '*'}
    prices[EXPIRING_PUT] = each(lambda n: conn.put_object(
        container, n, body, content_type='application/x-zd;id=1',
        headers=expiring))
    prices[EXPIRING_DELETE] = each(lambda n: conn.delete_object(container,
                                                                n))
    return prices


def swift_costs(server, redis_url, calls, repeat):
    from localstack.factories import swift as swift_factory
    ours, theirs = pairs.swift_pair(redis_url, server)
    tallies = {'ours': Tally(), 'theirs': Tally()}
    count_ours(ours, tallies['ours'])
    theirs._lazy_connection = CountingClient(
        swift_factory.TempauthClient(server), tallies['theirs'])
    prices = swift_prices(server, repeat)
    print('\n{:<34} {:>14}'.format('Swift servers\' CPU per request',
                                   'one at a time'))
    for kind in KINDS[:-1] + (EXPIRING_PUT, EXPIRING_DELETE):
        note = ' (100 listed)' if kind == 'listing' else ''
        print('{:<34} {:>11.2f} ms{}'.format(kind, prices[kind] * 1000,
                                             note))
    project = 'cost-' + uuid.uuid4().hex[:6]
    counted, measured = {}, {}
    for who, driver in (('ours', ours), ('theirs', theirs)):
        tally = tallies[who]
        queue = workloads.fresh_queue(driver, project)
        # Its first post makes the queue's container: not what a post
        # costs.
        post_calls(driver, project, queue, 1)
        tally.counts.clear()
        posted = spend(server.cpu_seconds,
                       lambda: post_calls(driver, project, queue, calls))
        post_counts = collections.Counter(tally.counts)
        tally.counts.clear()
        taken = []
        drained = spend(server.cpu_seconds, lambda: taken.append(
            workloads.drain(driver, project, queue, 10 * calls)))
        claims = taken[0] / 10
        counted[who] = ({k: v / calls for k, v in post_counts.items()},
                        {k: v / claims for k, v in tally.counts.items()})
        measured[who] = (posted / calls, drained / claims)
    for index, phase in enumerate(('post of 10',
                                   'claim of 10 + its deletes')):
        print('\n{:<34} {:>14} {:>15}'.format(
            phase + ', requests', 'zaqar-delay', 'zaqar built-in'))
        for kind in KINDS:
            pair = [counted[who][index].get(kind, 0)
                    for who in ('ours', 'theirs')]
            if any(pair):
                print('{:<34} {:>14.1f} {:>15.1f}'.format(kind, *pair))
        priced = [sum(n * prices[k] for k, n in counted[who][index].items())
                  for who in ('ours', 'theirs')]
        print_ratio_rows(phase + ', Swift CPU', ('priced', 'measured'),
                         (priced[0], measured['ours'][index]),
                         (priced[1], measured['theirs'][index]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--backend', action='append',
                        choices=('redis', 'swift'),
                        help='backends to measure (default: both)')
    parser.add_argument('--calls', type=int, default=0, metavar='N',
                        help='calls per round (default 200 on Redis, '
                             '10 on Swift)')
    args = parser.parse_args(argv)
    chosen = args.backend or ['redis', 'swift']
    with RedisServer() as server:
        if 'redis' in chosen:
            calls = args.calls or 200
            print('\n#### Redis:', server.binary, 'on', server.url, '-',
                  ROUNDS, 'rounds of', calls, 'calls each, taking turns')
            redis_costs(server.url, calls)
        if 'swift' in chosen:
            from localstack.swift_server import SwiftServer
            with SwiftServer() as swift:
                print('\n#### Swift: single node, one process per server,'
                      ' on', swift.url)
                swift_costs(swift, server.url, args.calls or 10, 100)


if __name__ == '__main__':
    main()
