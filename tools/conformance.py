"""Zaqar's own test suites on our drivers next to Zaqar's own drivers.

    .venv/bin/python -m tools.conformance [--backend B] [--suite S]
        [pytest args...]

Runs tests/zaqar_suites once with Zaqar's Redis, MongoDB (mongomock unless
ZAQAR_DELAY_TEST_MONGODB_URI names a server for ours) and Swift drivers
added (``ZAQAR_DELAY_COMPARE=1``), on the same servers, and prints passed /
failed / expected-failure / skipped counts per backend and suite.
``--backend`` and ``--suite`` run only that backend's or that suite's test
classes, ours and Zaqar's alike (tests/test_conformance_tool.py runs the
smallest such slice).
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree

CLASS = re.compile(r'Test(Zaqar)?(redis|mongodb|swift)(\w+)$', re.I)
OUTCOMES = ('passed', 'failed', 'xfailed', 'skipped')


def outcome(case):
    for child in case:
        if child.tag in ('failure', 'error'):
            return 'failed'
        if child.tag == 'skipped':
            kind = child.get('type', '')
            return 'xfailed' if 'xfail' in kind else 'skipped'
    return 'passed'


def pytest(*args, **kwargs):
    """Run pytest in a subprocess with Zaqar's drivers added to
    tests/zaqar_suites: the tool never imports the test tree itself."""
    env = dict(os.environ, ZAQAR_DELAY_COMPARE='1')
    return subprocess.run([sys.executable, '-m', 'pytest', '-p',
                           'no:cacheprovider', '-o', 'addopts=', '-q', '-W',
                           'ignore', *args], env=env, **kwargs)


def collected():
    """{(backend, Zaqar suite): [the ``path::Class`` node ids of our driver
    and Zaqar's]}, in the order pytest collects tests/zaqar_suites."""
    listing = pytest('--collect-only', 'tests/zaqar_suites',
                     capture_output=True, text=True)
    if listing.returncode != 0:
        sys.exit('pytest could not collect tests/zaqar_suites:\n'
                 + listing.stdout + listing.stderr)
    classes = {}
    for line in listing.stdout.splitlines():
        path, _, rest = line.partition('::')
        found = CLASS.match(rest.split('::', 1)[0])
        if found:
            node = '{}::{}'.format(path, found.group(0))
            nodes = classes.setdefault(
                (found.group(2).lower(), found.group(3)), [])
            if node not in nodes:
                nodes.append(node)
    return classes


def arguments(argv, classes):
    """(options, the arguments left for pytest)."""
    parser = argparse.ArgumentParser(
        prog='python -m tools.conformance', allow_abbrev=False,
        description="Run Zaqar's own test suites on our drivers and on "
        "Zaqar's drivers on the same servers, and print both sets of "
        "counts. Arguments not listed here go to pytest.")
    parser.add_argument('--backend',
                        choices=list(dict.fromkeys(b for b, _ in classes)),
                        help='only this backend (default: every one)')
    parser.add_argument('--suite',
                        choices=list(dict.fromkeys(s for _, s in classes)),
                        help="only this Zaqar suite (default: every one): "
                        "the storage suites, then the WSGI v2 ones")
    return parser.parse_known_args(argv)


def selection(options, classes):
    """The test classes pytest runs: ours and Zaqar's driver for each
    chosen backend and suite."""
    if options.backend is None and options.suite is None:
        return ['tests/zaqar_suites']
    return [node for (backend, suite), nodes in classes.items()
            if options.backend in (None, backend)
            and options.suite in (None, suite)
            for node in nodes]


def main(argv):
    classes = collected()
    options, pytest_args = arguments(argv, classes)
    with tempfile.TemporaryDirectory(prefix='zd-conformance-') as scratch:
        report = os.path.join(scratch, 'junit.xml')
        pytest('--junitxml', report, *selection(options, classes),
               *pytest_args)
        cases = list(ElementTree.parse(report).iter('testcase'))
    counts = collections.defaultdict(collections.Counter)
    for case in cases:
        found = CLASS.match(case.get('classname', '').rsplit('.', 1)[-1])
        if found:
            driver = ('Zaqar ' if found.group(1) else 'zaqar-delay ') + \
                found.group(2).lower()
            counts[(found.group(2).lower(), found.group(3), driver)][
                outcome(case)] += 1
    print('\n{:<8} {:<20} {:<20} {:>6} {:>6} {:>6} {:>6}'.format(
        'backend', 'suite', 'driver', *OUTCOMES))
    for key in sorted(counts):
        backend, suite, driver = key
        print('{:<8} {:<20} {:<20} {:>6} {:>6} {:>6} {:>6}'.format(
            backend, suite, driver, *(counts[key][o] for o in OUTCOMES)))


if __name__ == '__main__':
    main(sys.argv[1:])
