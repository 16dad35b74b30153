"""Every ``zaqar.conf`` excerpt in the README, docs/ and the
documentation site's pages (doc/source) reads as written
with oslo.config, which Zaqar reads it with: it takes ``#`` as a comment
only at the start of a line, so a comment after a value becomes part of
the value (``message_store = delay.redis  # or ...`` names no driver) and
one after a section name is a parse error."""

import pathlib
import re
import textwrap

import pytest
from oslo_config import cfg

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = ([ROOT / 'README.md'] + sorted((ROOT / 'docs').glob('*.md'))
         + sorted((ROOT / 'doc' / 'source').rglob('*.rst')))
INI_BLOCK = re.compile(r'^```ini\n(.*?)^```', re.S | re.M)
RST_INI_BLOCK = re.compile(r'^\.\. code-block:: ini\n\n((?:[ \t]+.*\n|\n)+)',
                           re.M)


def blocks_of(page):
    text = page.read_text()
    if page.suffix == '.rst':
        return [textwrap.dedent(block) for block in
                RST_INI_BLOCK.findall(text)]
    return INI_BLOCK.findall(text)


def ini_blocks():
    for page in PAGES:
        for number, block in enumerate(blocks_of(page), 1):
            if block.startswith('[['):
                continue  # a devstack local.conf, read by devstack's shell
            yield pytest.param(block, id='{}-{}'.format(page.name, number))


def test_the_pages_hold_ini_blocks():
    # The README's own excerpt among them: the check below reads them all.
    assert any('README' in param.id for param in ini_blocks())
    assert any('install.rst' in param.id for param in ini_blocks())
    assert len(list(ini_blocks())) >= 10


@pytest.mark.parametrize('block', list(ini_blocks()))
def test_an_ini_excerpt_parses_and_no_value_carries_a_comment(
        block, tmp_path):
    path = tmp_path / 'zaqar.conf'
    path.write_text(block)
    sections = {}
    cfg.ConfigParser(str(path), sections).parse()
    commented = ['[{}] {} = {}'.format(section, key, value)
                 for section, options in sections.items()
                 for key, values in options.items()
                 for value in values if re.search(r'\s#', value)]
    assert commented == []
