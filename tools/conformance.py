"""Zaqar's own test suites on our drivers next to Zaqar's own drivers.

    .venv/bin/python -m tools.conformance [pytest args...]

Runs tests/zaqar_suites once with Zaqar's Redis, MongoDB (mongomock unless
ZAQAR_DELAY_TEST_MONGODB_URI names a server for ours) and Swift drivers
added (``ZAQAR_DELAY_COMPARE=1``), on the same servers, and prints passed /
failed / expected-failure / skipped counts per backend and suite.
"""

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


def main(argv):
    report = os.path.join(tempfile.mkdtemp(prefix='zd-conformance-'),
                          'junit.xml')
    env = dict(os.environ, ZAQAR_DELAY_COMPARE='1')
    subprocess.call([sys.executable, '-m', 'pytest', '-p',
                     'no:cacheprovider', '-o', 'addopts=', '-q', '-W',
                     'ignore', '--junitxml', report, 'tests/zaqar_suites',
                     *argv], env=env)
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
