"""Loads the Lua scripts and runs them against one queue's keys."""

import functools
import pathlib

from zaqar_delay.drivers.redis import keys

LUA_DIR = pathlib.Path(__file__).parent / 'lua'
COMMON = (LUA_DIR / '_common.lua').read_text()
QUEUE_SCRIPTS = ('post', 'claim', 'list', 'first', 'get', 'delete',
                 'bulk_delete', 'claim_get', 'claim_renew', 'claim_release',
                 'stats', 'gc', 'outbox_done', 'purge', 'groups',
                 'group_purge', 'group_move', 'group_unpin', 'clean', 'consumers',
                 'consumer_register', 'consumer_forget', 'consumer_update',
                 'count_after', 'readers', 'consumer_subscribed',
                 'layout_free', 'meta_fill', 'meta_forget', 'notified')


@functools.lru_cache(maxsize=None)
def source(name):
    """The full text of one queue script: shared prelude, then its body."""
    return COMMON + '\n' + (LUA_DIR / (name + '.lua')).read_text()


class QueueScripts:
    """Runs queue scripts; every script gets the queue's KEYS and prefix.

    ``clock`` (ms since the epoch, or None for the Redis clock) exists so
    tests can move time; production code never sets it.
    """

    def __init__(self, client):
        self._client = client
        self._scripts = {name: client.register_script(source(name))
                         for name in QUEUE_SCRIPTS}
        self.clock = None

    def run(self, name, queue, project, *args, client=None):
        now = '' if self.clock is None else str(int(self.clock()))
        return self._scripts[name](
            keys=keys.queue_keys(queue, project),
            args=[keys.queue_prefix(queue, project), now, *args],
            client=client or self._client)
