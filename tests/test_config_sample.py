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
