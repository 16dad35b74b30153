"""Throughput per topology: one Redis, Zaqar pooling over two, a cluster.

    python -m benchmarks.topology [--quick] [--clients 1 2 4 8]

Each of N client processes posts (10 per post) and then claims and deletes
(10 per claim) on a queue of its own, through our Redis driver built as
Zaqar builds it: queue metadata in Zaqar's sqlalchemy store (sqlite); with
pooling each queue filed in Zaqar's catalogue, alternately on two
redis-servers; on a Redis Cluster of 3 masters (no replicas, append-only
file off like the other servers here) through the cluster client, the
queues named so that their hash tags fall on the masters in turn, as many
queues do on average. Prints messages per second of all clients together
(median of the rounds; topologies alternate so that noise falls on all)
and the pooled / single and cluster / single ratios; then the CPU time the
clients' Python (our driver, redis-py, Zaqar's pipeline) used per
message, which bounds throughput where clients and servers share a few
cores.
"""

import argparse
import multiprocessing
import os
import statistics
import sys
import time
import uuid

from benchmarks import workloads
from localstack import pooling_catalog as pooled
from localstack import scratch
from localstack.redis_cluster import RedisCluster
from localstack.redis_server import RedisServer

GROUP = 'drivers:message_store:delay.redis'


TOPOLOGIES = ('single', 'pools', 'cluster')


def _drivers(directory, uris, topology):
    """(control driver, message store for a queue) for this process;
    ``uris`` has the single server's, the second pool's and the
    cluster's."""
    conf, control, catalog = pooled.make_catalog(directory, 'delay.redis')
    if topology == 'pools':
        return control, lambda queue, project: catalog.lookup(queue, project)
    from zaqar_delay import conf as zd_conf
    from zaqar_delay.conf import redis as redis_conf
    from zaqar_delay.drivers.redis import driver as redis_driver
    zd_conf.register(conf, redis_conf)
    conf.set_override('pooling', False)
    conf.set_override('uri', uris[2 if topology == 'cluster' else 0],
                      group=GROUP)
    from zaqar.storage import pipeline
    # Wrapped in Zaqar's storage pipeline, as each pool's driver is.
    single = pipeline.DataDriver(
        conf, redis_driver.DataDriver(conf, None, control), control)
    return control, lambda queue, project: single


def _client(directory, uris, topology, queue, project, total, start, out):
    _, driver_for = _drivers(directory, uris, topology)
    driver = driver_for(queue, project)
    batch = [{'ttl': 3600, 'body': {'n': n, 'pad': 'x' * 64}}
             for n in range(10)]
    driver.message_controller.first  # warm: connection, scripts, metadata
    driver.message_controller.post(queue, batch[:1], workloads.CLIENT,
                                   project=project)
    out.put('ready')
    start.wait()
    began, cpu_began = time.perf_counter(), time.process_time()
    for _ in range(total // 10):
        driver.message_controller.post(queue, batch, workloads.CLIENT,
                                       project=project)
    posted, cpu_posted = time.perf_counter(), time.process_time()
    workloads.drain(driver, project, queue, total + 1)  # + the warm-up
    out.put((began, posted, time.perf_counter(), cpu_posted - cpu_began,
             time.process_time() - cpu_posted))


def spread(cluster, project, count):
    """``count`` queue names whose hash tags fall on the cluster's
    masters in turn."""
    from zaqar_delay.drivers.redis import keys
    names, attempt = [], 0
    while len(names) < count:
        name = 'q%d' % attempt
        attempt += 1
        node = cluster.node_for_key(keys.queue_keys(name, project)[0])
        if node is cluster.nodes[len(names) % len(cluster.nodes)]:
            names.append(name)
    return names


def run_round(directory, uris, topology, clients, total, cluster):
    """(post msg/s, claim+delete msg/s) of ``clients`` processes, and
    the CPU their Python used per message (µs) in each phase."""
    control, _ = _drivers(directory, uris, topology)
    project = 'bench-' + uuid.uuid4().hex[:6]
    queues = (spread(cluster, project, clients) if topology == 'cluster'
              else ['q%d' % i for i in range(clients)])
    for i, queue in enumerate(queues):
        if topology == 'pools':
            pooled.place(control, queue, project, 'p%d' % (i % 2))
        else:
            control.queue_controller.create(queue, project=project)
    context = multiprocessing.get_context('spawn')
    start, out = context.Event(), context.Queue()
    processes = [context.Process(target=_client, args=(
        directory, uris, topology, queue, project, total, start, out))
        for queue in queues]
    for process in processes:
        process.start()
    for _ in processes:
        assert out.get(timeout=300) == 'ready'
    start.set()
    times = [out.get(timeout=600) for _ in processes]
    for process in processes:
        process.join()
    began = min(t[0] for t in times)
    posted = max(t[1] for t in times)
    ended = max(t[2] for t in times)
    # Post phases overlap claim phases of faster clients a little; the
    # figures are per phase boundary of the slowest client.
    return (clients * total / (posted - began),
            clients * total / (ended - min(t[1] for t in times)),
            sum(t[3] for t in times) * 1e6 / (clients * total),
            sum(t[4] for t in times) * 1e6 / (clients * total))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--clients', type=int, nargs='+', default=[1, 2, 4])
    args = parser.parse_args(argv)
    total, rounds = (500, 1) if args.quick else (2000, 3)
    servers = [RedisServer().start(), RedisServer().start()]
    cluster = RedisCluster(masters=3, appendonly=False).start()
    try:
        uris = [s.url.replace('redis://', 'delay.redis://') for s in servers]
        directory = scratch.scratch_dir('zd-topology-')
        _, control, _ = pooled.make_catalog(directory, 'delay.redis')
        for i, uri in enumerate(uris):
            control.pools_controller.create('p%d' % i, 100, uri)
        uris.append(cluster.url)
        print('throughput, msg/s of all clients ({} msgs each, median of {} '
              'rounds); {} CPU cores shared by every server and client, '
              'load average {:.1f}'.format(total, rounds, os.cpu_count(),
                                           os.getloadavg()[0]))
        print('{:<8} {:<32} {:>10} {:>10} {:>10} {:>7} {:>8}'.format(
            'clients', '', 'one Redis', '2 pools', 'cluster 3', 'pools',
            'cluster'))
        for clients in args.clients:
            rates = {topology: [] for topology in TOPOLOGIES}
            for _ in range(rounds):
                for topology in TOPOLOGIES:
                    rates[topology].append(run_round(
                        directory, uris, topology, clients, total, cluster))
            for index, label in enumerate((
                    'post (10/post)', 'claim+delete (10/claim)',
                    'post: client CPU us/msg',
                    'claim+delete: client CPU us/msg')):
                single, pools, clustered = (
                    statistics.median(r[index] for r in rates[topology])
                    for topology in TOPOLOGIES)
                print('{:<8} {:<32} {:>10,.0f} {:>10,.0f} {:>10,.0f} '
                      '{:>6.2f}x {:>7.2f}x'.format(
                          clients, label, single, pools, clustered,
                          pools / single, clustered / single))
    finally:
        cluster.stop()
        for server in servers:
            server.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
