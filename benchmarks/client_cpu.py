"""Our Redis driver's own CPU per message, with and without hiredis.

    python -m benchmarks.client_cpu [--messages N] [--repeats N]

Starts one redis-server and, in turn, two child processes that drive our
Redis driver in-process through posts of 10, a claim of 10 and a delete
of each claimed message: one with hiredis hidden from redis-py (its pure
Python packing and parsing), one as installed (setup.cfg asks for
``redis[hiredis]``). Each prints the CPU time of its own process per
message, which is the driver's and redis-py's work (the server's is not
counted) and does not wait on the machine's load the way wall time does;
this prints both, alternating ``--repeats`` times, and the ratio of the
medians.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid

from benchmarks import workloads
from localstack.redis_server import RedisServer

WARM_ROUNDS = 50


def drive(redis_url, messages):
    """Child process: (CPU seconds, wall seconds) per message."""
    import redis.utils
    from benchmarks.run import redis_pair
    ours, _ = redis_pair(redis_url)
    project = 'cpu-' + uuid.uuid4().hex[:8]
    queue = workloads.fresh_queue(ours, project)
    batch = [{'ttl': 300, 'body': {'n': n}} for n in range(10)]

    def one_round():
        ours.message_controller.post(queue, batch, workloads.CLIENT,
                                     project=project)
        workloads.drain(ours, project, queue, 10)

    for _ in range(WARM_ROUNDS):
        one_round()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(messages // 10):
        one_round()
    return {'hiredis': redis.utils.HIREDIS_AVAILABLE,
            'cpu': (time.process_time() - cpu) / messages,
            'wall': (time.perf_counter() - wall) / messages}


def child(redis_url, messages, hide_hiredis):
    code = ('import json, sys\n'
            + ('sys.modules["hiredis"] = None\n' if hide_hiredis else '')
            + 'from benchmarks import client_cpu\n'
            + 'print(json.dumps(client_cpu.drive(%r, %d)))'
            % (redis_url, messages))
    out = subprocess.run([sys.executable, '-c', code], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--messages', type=int, default=12000)
    parser.add_argument('--repeats', type=int, default=6)
    args = parser.parse_args(argv)
    figures = {True: [], False: []}
    with RedisServer() as server:
        for _ in range(args.repeats):
            for hide in (True, False):
                result = child(server.url, args.messages, hide)
                if result['hiredis'] == hide:
                    sys.exit('redis-py {} hiredis: nothing to compare'
                             .format('still used' if hide else 'lacks'))
                figures[result['hiredis']].append(result)
                print('hiredis {:<5}  CPU {:6.1f} us/message  wall {:6.1f} '
                      'us/message'.format(str(result['hiredis']),
                                          result['cpu'] * 1e6,
                                          result['wall'] * 1e6))
    median = {used: statistics.median(r['cpu'] for r in runs)
              for used, runs in figures.items()}
    print('median CPU per message (post, claim, delete): without hiredis '
          '{:.1f} us, with {:.1f} us; with / without {:.2f}x'.format(
              median[False] * 1e6, median[True] * 1e6,
              median[True] / median[False]))


if __name__ == '__main__':
    main()
