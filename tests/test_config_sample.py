"""etc/zaqar-delay.conf.sample is what oslo-config-generator makes now."""

import pathlib
import subprocess
import sys

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
