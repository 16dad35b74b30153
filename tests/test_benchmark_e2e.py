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


def test_the_ceiling_declares_its_queue_stage(tmp_path):
    # Zaqar's pipeline finds a store's stages under "<module>.queue.stages".
    from importlib import metadata
    e2e.ceiling_environment(str(tmp_path))
    found = metadata.distributions(path=[str(tmp_path)])
    points = {(ep.group, ep.name): ep.value
              for dist in found for ep in dist.entry_points}
    assert points[('zaqar.data.storage', e2e.CEILING_STORE)] == \
        'benchmarks.memory_store:DataDriver'
    assert points[('benchmarks.memory_store.queue.stages',
                   'message_queue_handler')] == \
        'benchmarks.memory_store:QueueStage'


def test_the_ceiling_stage_reads_the_control_store_once_per_change(
        redis_url, project):
    from zaqar.common import pipeline as common
    from benchmarks import memory_store
    from benchmarks import round_trips
    from localstack import backends
    control = backends.control_driver(backends.make_conf(), redis_url)
    queues = common.Pipeline([memory_store.QueueStage(None, control),
                              control.queue_controller])
    queues.create('q', metadata={'a': 1}, project=project)
    with round_trips.counting() as counter:
        assert queues.get_metadata('q', project=project) == {'a': 1}
        assert queues.get_metadata('q', project=project) == {'a': 1}
    assert counter.of(control.connection) == 2    # the first read only
    queues.set_metadata('q', {'a': 2}, project=project)
    assert queues.get_metadata('q', project=project) == {'a': 2}
    queues.delete('q', project=project)
