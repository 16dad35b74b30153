"""``python -m benchmarks.e2e`` runs end to end at a tiny size: three
zaqar-servers (ours, Zaqar's Redis driver, the in-memory ceiling loaded
through its entry point) driven over HTTP, and prints every driver's
figures, the ratios and the targets (no figure is asserted: it is a
benchmark)."""

import re

import pytest

from benchmarks import e2e

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_e2e_benchmark_prints_every_driver(capsys):
    e2e.main(['--quick', '--delayed', '40', '--seconds', '0.5',
              '--clients', '3'])
    out = capsys.readouterr().out
    for title in ('empty queue', '40 delayed messages ahead'):
        section = out.split('#### ' + title)[1].split('####')[0]
        for _, heading, _ in e2e.COLUMNS:
            # The heading's line holds the rest of it: the kinds.
            table = '\n'.join(section.split(heading)[1].splitlines()[1:6])
            for label in e2e.LABELS:
                assert re.search(r'^%s +[\d.,]+ +[\d.,]+ +[\d.,]+$' % label,
                                 table, re.M), table
            for other in ('zaqar', 'ceiling'):
                assert re.search(r'^ratio ours / %s( +([\d.]+|nan)x){3}$'
                                 % other, table, re.M), table
    for label in e2e.LABELS:
        assert '%s: 40 delayed messages posted' % label in out
    targets = out.split('#### targets (issue 21)')[1].strip().splitlines()
    assert len(targets) == 5
    assert all(line.endswith((' met', ' NOT met')) for line in targets)
