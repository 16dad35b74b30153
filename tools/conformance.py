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

from tests.factories import BACKENDS
from tests.zaqar_suites import expected

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


def suites():
    """{Zaqar suite name: path of the test module that runs it}."""
    # Imported only here: the conftest sets ZAQAR_TEST_MONGODB, which
    # Zaqar's WSGI test classes read when its test helpers first load.
    from tests.zaqar_suites import conftest  # noqa: F401
    from tests.zaqar_suites import test_storage
    from tests.zaqar_suites import test_wsgi
    return {suite: 'tests/zaqar_suites/{}.py'.format(
        module.__name__.rsplit('.', 1)[-1])
        for module in (test_storage, test_wsgi) for suite in module.SUITES}


def arguments(argv, modules):
    """(options, the arguments left for pytest)."""
    parser = argparse.ArgumentParser(
        prog='python -m tools.conformance', allow_abbrev=False,
        description="Run Zaqar's own test suites on our drivers and on "
        "Zaqar's drivers on the same servers, and print both sets of "
        "counts. Arguments not listed here go to pytest.")
    parser.add_argument('--backend', choices=BACKENDS,
                        help='only this backend (default: every one)')
    parser.add_argument('--suite', choices=list(modules),
                        help="only this Zaqar suite (default: every one): "
                        "the storage suites, then the WSGI v2 ones")
    return parser.parse_known_args(argv)


def selection(options, modules):
    """The test classes pytest runs: ours and Zaqar's driver for each
    chosen backend and suite."""
    if options.backend is None and options.suite is None:
        return ['tests/zaqar_suites']
    return ['{}::{}'.format(modules[suite],
                            expected.class_name(prefix + backend, suite))
            for backend in ([options.backend] if options.backend
                            else BACKENDS)
            for suite in ([options.suite] if options.suite else modules)
            for prefix in ('', 'zaqar-')]


def main(argv):
    modules = suites()
    options, pytest_args = arguments(argv, modules)
    report = os.path.join(tempfile.mkdtemp(prefix='zd-conformance-'),
                          'junit.xml')
    env = dict(os.environ, ZAQAR_DELAY_COMPARE='1')
    subprocess.call([sys.executable, '-m', 'pytest', '-p',
                     'no:cacheprovider', '-o', 'addopts=', '-q', '-W',
                     'ignore', '--junitxml', report,
                     *selection(options, modules), *pytest_args], env=env)
    counts = collections.defaultdict(collections.Counter)
    for case in ElementTree.parse(report).iter('testcase'):
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
