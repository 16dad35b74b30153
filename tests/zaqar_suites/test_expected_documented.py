"""docs/compatibility.md's table of where we differ from Zaqar's suites
lists exactly the expected failures tests/zaqar_suites/expected.py
marks."""

import pathlib
import re

from tests.zaqar_suites import expected

COMPATIBILITY = (pathlib.Path(__file__).resolve().parents[2] / 'docs'
                 / 'compatibility.md')
BACKENDS = {'Redis': 'redis', 'MongoDB': 'mongodb', 'Swift': 'swift'}
SUITES = {'ClaimControllerTest': 'Claims', 'MessageControllerTest':
          'Messages', 'QueueControllerTest': 'Queues',
          'SubscriptionControllerTest': 'Subscriptions',
          'TestHealthMongoDB': 'WsgiHealth'}


def documented():
    text = COMPATIBILITY.read_text()
    table = text.split('Where we differ, by design', 1)[1].split('\n\n')[1]
    rows, test = set(), None
    for line in table.splitlines()[2:]:
        name, where = [cell.strip() for cell in line.strip('|').split('|')][:2]
        if name != 'same test':
            suite_class, test = re.fullmatch(r'`(\w+)\.(\w+)`', name).groups()
            suite = SUITES[suite_class]
        for backend in where.split(', '):
            rows.add((BACKENDS[backend], suite, test))
    return rows


def test_the_readme_lists_every_expected_failure_and_no_other():
    assert documented() == set(expected.EXPECTED)
