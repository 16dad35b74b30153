"""What ``replica_acks`` costs: our Redis driver on a master with one
replica (loopback), acknowledging once the master has a write (0) or once
the replica has it too (1, Redis WAIT in the same round trip).

    python -m benchmarks.replication [--quick]

Rounds alternate between the two settings so that noise on a shared
machine falls on both alike; prints the median rates and their ratio.
"""

import argparse
import statistics
import sys
import uuid

from benchmarks import workloads
from localstack import backends
from localstack import redis_sentinel
from zaqar_delay.drivers.redis import driver as redis_driver

GROUP = 'drivers:message_store:delay.redis'


def make_driver(master, control_url, acks):
    conf = backends.make_conf(**{GROUP: {
        'uri': 'delay.redis://127.0.0.1:%d/0' % master.port,
        'replica_acks': acks}})
    return redis_driver.DataDriver(conf, None,
                                   backends.control_driver(conf, control_url))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true')
    args = parser.parse_args(argv)
    total, rounds = (1000, 3) if args.quick else (5000, 5)
    master, replica = redis_sentinel.replicated_pair()
    try:
        drivers = {acks: make_driver(master, master.url, acks)
                   for acks in (0, 1)}
        project = 'bench-' + uuid.uuid4().hex[:6]
        print('replica_acks cost (master + 1 replica on loopback, {} msgs '
              'x {} rounds, median)'.format(total, rounds))
        print('{:<28} {:>16} {:>16} {:>8}'.format(
            '', 'replica_acks 0', 'replica_acks 1', 'ratio'))
        for label, run in (('post (10/post)', workloads.post_throughput),
                           ('claim+delete (10/claim)',
                            workloads.claim_delete_throughput)):
            rates = {0: [], 1: []}
            for _ in range(rounds):
                for acks, driver in drivers.items():
                    rates[acks].append(run(driver, project, total))
            none, one = (statistics.median(rates[a]) for a in (0, 1))
            print('{:<28} {:>10,.0f} msg/s {:>10,.0f} msg/s {:>7.2f}x'
                  .format(label, none, one, one / none))
        for driver in drivers.values():
            driver.close()
    finally:
        master.stop()
        replica.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
