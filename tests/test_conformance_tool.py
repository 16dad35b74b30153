"""README: ``python -m tools.conformance`` runs Zaqar's suites on our
drivers and on Zaqar's own drivers, on the same servers, and prints both
sets of counts side by side. Run here for real on its smallest slice
(Redis, Zaqar's 3-test storage queues suite): both drivers' rows must be
printed, with the counts of the README's table, ours matching the expected
failures of tests/zaqar_suites/expected.py.
"""

import pathlib
import re
import subprocess
import sys

from tests.zaqar_suites import expected

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUTCOMES = ['passed', 'failed', 'xfailed', 'skipped']
HEADER = ['backend', 'suite', 'driver'] + OUTCOMES


def conformance(*args):
    return subprocess.run([sys.executable, '-m', 'tools.conformance',
                           *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def printed_table(stdout):
    """{driver: {outcome: count}} from the table the tool prints last."""
    lines = stdout.rstrip().split('\n\n')[-1].splitlines()
    assert lines[0].split() == HEADER, stdout
    rows = {}
    for line in lines[1:]:
        backend, suite, *driver, passed, failed, xfailed, skipped = \
            line.split()
        counts = [passed, failed, xfailed, skipped]
        assert all(re.fullmatch(r'\d+', count) for count in counts), line
        rows[(backend, suite, ' '.join(driver))] = dict(
            zip(OUTCOMES, map(int, counts)))
    return rows


def readme_row(title):
    """{column title: cell} of the README's conformance table row whose
    first cell starts with ``title``."""
    text = (ROOT / 'docs' / 'compatibility.md').read_text()
    lines = text.split('| suite (tests) |', 1)[1].split('\n\n')[0]
    header = ['suite (tests)'] + [
        cell.strip() for cell in lines.splitlines()[0].strip('|').split('|')]
    for line in lines.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip('|').split('|')]
        if cells[0].startswith(title):
            return dict(zip(header, cells))
    raise AssertionError('README has no conformance row ' + title)


def counts(cell):
    return [int(count) for count in cell.split(' / ')]


def test_the_tool_prints_ours_next_to_zaqars_on_one_suite():
    result = conformance('--backend', 'redis', '--suite', 'Queues')
    assert result.returncode == 0, result.stdout + result.stderr
    rows = printed_table(result.stdout)

    ours = ('redis', 'Queues', 'zaqar-delay redis')
    zaqars = ('redis', 'Queues', 'Zaqar redis')
    assert set(rows) == {ours, zaqars}, result.stdout
    row = readme_row('storage: queues (')
    tests = int(re.search(r'\((\d+)\)', row['suite (tests)']).group(1))
    assert sum(rows[ours].values()) == tests
    assert sum(rows[zaqars].values()) == tests
    # Ours: every test passes but the expected failures of expected.py,
    # which fail as expected; the README says the same.
    xfails = sum(1 for where, suite, _ in expected.EXPECTED
                 if where in ('*', 'redis') and suite == 'Queues')
    assert rows[ours] == {'passed': tests - xfails, 'failed': 0,
                          'xfailed': xfails, 'skipped': 0}
    assert counts(row['ours: Redis']) == [
        rows[ours][outcome] for outcome in OUTCOMES[:3]]
    # Zaqar's own driver carries no expected failures: passed / failed.
    assert rows[zaqars]['xfailed'] == 0
    assert counts(row["Zaqar's Redis"]) == [
        rows[zaqars][outcome] for outcome in OUTCOMES[:2]]


def test_the_options_are_documented_and_checked():
    help_text = conformance('--help')
    assert help_text.returncode == 0, help_text.stderr
    for option in ('--backend', '--suite', 'Queues', 'WsgiClaims', 'swift'):
        assert option in help_text.stdout

    wrong = conformance('--suite', 'Queue')
    assert wrong.returncode == 2
    assert "--suite: invalid choice: 'Queue'" in wrong.stderr
