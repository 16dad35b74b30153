"""Retention cost on every backend, figures and ratios side by side.

    python -m benchmarks.retention [--quick] [redis|mongodb|swift ...]

Runs ``benchmarks/retention_<backend>.py`` (one module per backend, each
runnable as ``python -m benchmarks.retention_<backend>`` and printing its
own figures) for every backend named, or all of them, one after the
other; each gets the arguments given here but the backend names (such as
``--quick``). Then repeats every line with the word "ratio" in it (each
backend module prints its ratios that way) under one heading, so the issue's targets read in one place: claim latency and post
throughput with ``length`` under overflow (within 1.2x), a cleanup pass
over full queues with nothing to remove against empty ones (within 2x),
and time per removed message for two sizes (O(N)).
"""

import pathlib
import subprocess
import sys

BACKENDS = ('redis', 'mongodb', 'swift')
HERE = pathlib.Path(__file__).resolve().parent


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


if __name__ == '__main__':
    sys.exit(main())
