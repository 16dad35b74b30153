"""Retention cost on every backend, figures and ratios side by side.

    python -m benchmarks.retention [--quick] [redis|mongodb|swift ...]

Runs ``benchmarks/retention_<backend>.py`` (one module per backend, each
runnable as ``python -m benchmarks.retention_<backend>`` and printing its
own figures) for every backend named, or all of them, one after the
other; each gets the arguments given here but the backend names (such as
``--quick``). Then repeats every line with the word "ratio" in it (each
backend module prints its ratios that way) under one heading, so the
issue's targets read in one place: claim latency and post throughput
with ``length`` under overflow (within 1.2x), a cleanup pass over full
queues with nothing to remove against empty ones (within 2x),
and time per removed message for two sizes (O(N)).
"""

import pathlib
import subprocess
import sys
import time
import uuid

BACKENDS = ('redis', 'mongodb', 'swift')
HERE = pathlib.Path(__file__).resolve().parent
# What the Redis and Swift modules post as, with queue() and
# post_seconds() below.
PROJECT = 'bench'
CLIENT = uuid.UUID('33333333-3333-4333-8333-333333333333')


def main(argv=None, family='retention'):
    """Run ``benchmarks/<family>_<backend>.py`` for the chosen backends
    (benchmarks/consumers.py runs this for its own family)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = [arg for arg in argv if arg in BACKENDS] or list(BACKENDS)
    passed = [arg for arg in argv if arg not in BACKENDS]
    ratios, failed = [], []
    for backend in chosen:
        module = '{}_{}'.format(family, backend)
        print('== {} ({})'.format(backend, module), flush=True)
        if not (HERE / (module + '.py')).exists():
            print('   not written yet: benchmarks/{}.py'.format(module))
            continue
        run = subprocess.run(
            [sys.executable, '-m', 'benchmarks.' + module, *passed],
            cwd=HERE.parent, stdout=subprocess.PIPE, text=True)
        print(run.stdout, end='', flush=True)
        if run.returncode:
            failed.append(backend)
        ratios += ['{:8} {}'.format(backend, line.strip())
                   for line in run.stdout.splitlines()
                   if 'ratio' in line.lower()]
    print('== ratios')
    print('\n'.join(ratios) or '   none printed')
    if failed:
        print('failed: ' + ', '.join(failed))
    return 1 if failed else 0


def queue(driver, retention=None):
    name = 'r-' + uuid.uuid4().hex[:8]
    metadata = {'_retention': retention} if retention else {}
    driver.queue_controller.create(name, metadata=metadata, project=PROJECT)
    return name


def post_seconds(driver, name, start):
    """Seconds one post of 10 messages took."""
    messages = [{'ttl': 3600, 'body': n} for n in range(start, start + 10)]
    started = time.perf_counter()
    driver.message_controller.post(name, messages, CLIENT, project=PROJECT)
    return time.perf_counter() - started


def overflow(driver, args, claim):
    """{label: (posts/s, [claim(queue name) ...])}: ``args.posted``
    messages posted 10 per call to a queue with retention ``length``
    ``args.length`` and to one without, then ``args.claims`` claims,
    each after 10 more posted. The two queues take turns call by call,
    so a change in the machine's load hits both alike."""
    queues = {'without retention': queue(driver),
              'length %d' % args.length: queue(driver,
                                               {'length': args.length})}
    posting = {label: 0.0 for label in queues}
    for start in range(0, args.posted, 10):
        for label, name in queues.items():
            posting[label] += post_seconds(driver, name, start)
    latencies = {label: [] for label in queues}
    for n in range(args.claims):
        for label, name in queues.items():
            post_seconds(driver, name, n * 10)
            latencies[label].append(claim(name))
    return {label: (args.posted / posting[label], latencies[label])
            for label in queues}


if __name__ == '__main__':
    sys.exit(main())
