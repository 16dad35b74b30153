"""etc/zaqar-delay.conf.sample is what oslo-config-generator makes now."""

import pathlib
import subprocess
import sys

from localstack import backends
from zaqar_delay.conf import mongodb as mongodb_options
from zaqar_delay.conf import retention as retention_options

ROOT = pathlib.Path(__file__).resolve().parent.parent
GENERATOR_CONFIG = ROOT / 'etc' / 'oslo-config-generator' / 'zaqar-delay.conf'
SAMPLE = ROOT / 'etc' / 'zaqar-delay.conf.sample'
REGENERATE = ('.venv/bin/oslo-config-generator --config-file '
              'etc/oslo-config-generator/zaqar-delay.conf')


def test_sample_config_is_up_to_date(tmp_path):
    fresh = tmp_path / 'zaqar-delay.conf.sample'
    subprocess.run(
        [sys.executable, '-m', 'oslo_config.generator', '--config-file',
         str(GENERATOR_CONFIG), '--output-file', str(fresh)],
        cwd=ROOT, check=True)
    assert SAMPLE.read_text() == fresh.read_text(), (
        '{} is stale: regenerate it with `{}`'.format(
            SAMPLE.relative_to(ROOT), REGENERATE))


def test_the_defaults_docs_usage_md_states():
    """docs/usage.md's table of zaqar-delay-gc's options and its
    persistent consumers section name these defaults, as numbers."""
    conf = backends.make_conf()
    retention = conf[retention_options.GROUP_NAME]
    assert (retention.tuples_per_iteration, retention.iteration_delay,
            retention.full_scan_time, retention.consumer_idle_time) == (
        1000, 0.0, 60.0, 86400)
    assert conf[mongodb_options.GROUP_NAME].reservation_timeout == 60
    usage = (ROOT / 'docs' / 'usage.md').read_text()
    for row in ('| `--tuples_per_iteration` | 1000 |',
                '| `--iteration_delay` | 0.0 |',
                '| `--full_scan_time` | 60.0 |',
                'consumer_idle_time` seconds (default 86400)',
                '`reservation_timeout` (default 60 s)'):
        assert row in usage, row


def test_the_defaults_docs_options_md_states():
    """Each row of docs/options.md for an option of ours states its
    registered default ("same" in the group column repeats the row
    above's group)."""
    conf = backends.make_conf()
    text = (ROOT / 'docs' / 'options.md').read_text()
    checked, group = [], None
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip('|').split('|')]
        if len(cells) != 4 or not cells[0].startswith('`'):
            continue
        name, where, default = cells[0].strip('`'), cells[1], cells[2]
        if where != 'same':
            group = where.split()[0].strip('`[]')
        if group not in ('retention', 'drivers:message_store:delay.redis'):
            continue
        registered = getattr(conf[group], name)
        if default == 'unset':
            assert registered is None, name
        elif default.startswith('`'):
            assert str(registered) == default.strip('`'), name
        else:
            assert registered == float(default), (name, default)
        checked.append(name)
    assert checked == [
        'uri', 'socket_timeout', 'max_reconnect_attempts',
        'reconnect_sleep', 'loading_wait', 'deleted_id_memory',
        'replica_acks', 'replica_ack_timeout', 'policy', 'time', 'length',
        'consumers_required', 'consumer_idle_time', 'tuples_per_iteration',
        'full_scan_time', 'iteration_delay']
