"""Every ``zaqar.conf`` excerpt in the README, docs/ and the
documentation site's pages (doc/source) reads as written
with oslo.config, which Zaqar reads it with: it takes ``#`` as a comment
only at the start of a line, so a comment after a value becomes part of
the value (``message_store = delay.redis  # or ...`` names no driver) and
one after a section name is a parse error."""

import pathlib
import re
import textwrap
import types

import pytest
from oslo_config import cfg

from localstack import backends
from zaqar_delay.conf import redis as redis_conf
from zaqar_delay.drivers.redis import driver as redis_driver

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


@pytest.mark.parametrize('block', [
    block for block in list(ini_blocks())
    if '[{}]'.format(redis_conf.GROUP_NAME) in block.values[0]])
def test_a_redis_excerpt_keeps_the_retry_span_the_driver_allows(
        block, tmp_path):
    # The driver warns when a retry could arrive after Zaqar's shortest
    # message ttl (a post retried after its messages expired would store
    # them again); an excerpt an operator copies must not set that up.
    path = tmp_path / 'zaqar.conf'
    path.write_text(block)
    conf = backends.make_conf(config_files=[path])
    span_ms = redis_driver.DataDriver.retry_span_ms.fget(
        types.SimpleNamespace(store_conf=conf[redis_conf.GROUP_NAME]))
    assert span_ms < redis_driver.SHORTEST_TTL_MS
