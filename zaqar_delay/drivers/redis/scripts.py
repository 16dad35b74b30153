"""Loads the Lua scripts and runs them against one queue's keys."""

import functools
import pathlib

from redis import exceptions as redis_errors

from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import prelude
from zaqar_delay.drivers.redis import sending

LUA_DIR = pathlib.Path(__file__).parent / 'lua'
COMMON = (LUA_DIR / '_common.lua').read_text()
QUEUE_SCRIPTS = ('post', 'claim', 'list', 'first', 'get', 'delete',
                 'bulk_delete', 'claim_get', 'claim_renew', 'claim_release',
                 'stats', 'gc', 'outbox_done', 'purge', 'groups',
                 'group_purge', 'group_move', 'group_unpin', 'clean',
                 'consumers',
                 'consumer_register', 'consumer_forget', 'consumer_update',
                 'count_after', 'readers', 'consumer_subscribed',
                 'layout_free', 'meta_read', 'meta_fill', 'meta_forget',
                 'notified', 'subscriber_free')

# Scripts whose effects a caller cannot tell apart when its whole call
# runs again: reads, and the housekeeping they do on the way (settling
# due messages, filing indexes). See metadata_copy.take_assumed.
REPEATABLE = frozenset({
    'list', 'first', 'get', 'stats', 'count_after', 'consumers', 'readers',
    'claim_get', 'groups', 'meta_read'})


@functools.lru_cache(maxsize=None)
def source(name):
    """The full text of one queue script: the part of the shared prelude
    it uses (prelude.py), then its body."""
    body = (LUA_DIR / (name + '.lua')).read_text()
    return prelude.for_script(COMMON, body) + '\n' + body


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
        pool = getattr(client, 'connection_pool', None)
        # None on a cluster client, which routes each call by slot.
        self._held = None if pool is None else sending.HeldConnection(pool)

    def run(self, name, queue, project, *args, client=None,
            generation=None):
        """``generation``: the queue's metadata generation the call
        assumed (metadata_copy.take_assumed; '' for none), or None to
        check nothing. When it moved the script does nothing and answers
        connection.STALE_REPLY."""
        now = '' if self.clock is None else str(int(self.clock()))
        check = '' if generation is None else 'g' + generation
        script = self._scripts[name]
        script_keys = keys.script_keys(queue, project)
        script_args = [keys.queue_prefix(queue, project), now, check, *args]
        if client is not None or self._held is None:
            # A pipeline, or a cluster client.
            return script(keys=script_keys, args=script_args,
                          client=client or self._client)
        try:
            return self._held.evalsha(script.sha, script_keys, script_args)
        except redis_errors.NoScriptError:
            # A restarted or failed-over server: load it there, run again.
            return script(keys=script_keys, args=script_args)
