"""``zaqar-delay-groups``: manage a queue's message groups.

Reads the same ``zaqar.conf`` as ``zaqar-server`` (``--config-file``) and
talks to the message store directly, as ``zaqar-gc`` does::

    zaqar-delay-groups --config-file zaqar.conf list PROJECT QUEUE
    zaqar-delay-groups --config-file zaqar.conf purge PROJECT QUEUE GROUP
    zaqar-delay-groups --config-file zaqar.conf move PROJECT QUEUE GROUP TARGET
    zaqar-delay-groups --config-file zaqar.conf unpin PROJECT QUEUE GROUP

``list`` prints one JSON object per group; on a sticky queue
(``_message_group_sticky``) its ``client`` is the Client-ID the group is
pinned to (null when none). ``unpin`` frees a group from its client: its
next message goes to whichever client claims first.

A GROUP given as ``int:42`` means the integer 42; anything else is the
string as typed (``str:int:42`` for the string "int:42").
"""

import json
import sys

from zaqar.storage import errors as storage_errors
from zaqar.storage import pooling

from zaqar_delay import cmd
from zaqar_delay import errors

ACTIONS = {'list': 2, 'purge': 3, 'move': 4, 'unpin': 3}


def parse_group(text):
    if text.startswith('int:'):
        try:
            return int(text[4:])
        except ValueError:
            raise errors.InvalidInput(
                'group {!r}: int: takes an integer (str:{} is that '
                'string)'.format(text, text))
    if text.startswith('str:'):
        return text[4:]
    return text


def add_parsers(subparsers):
    for action, count in ACTIONS.items():
        parser = subparsers.add_parser(action)
        for name in ('project', 'queue', 'group', 'target')[:count]:
            parser.add_argument(name)


def message_controller(store, queue, project):
    """The data driver's message controller; with pooling, that of the
    pool the queue is catalogued on (Zaqar's pooling driver has no group
    operations to route)."""
    if not isinstance(store, pooling.DataDriver):
        return store.message_controller
    pool = store._pool_catalog.lookup(queue, project)
    if pool is None:
        raise storage_errors.QueueDoesNotExist(queue, project)
    return pool._storage.message_controller


def main(argv=None, out=sys.stdout):
    action, store = cmd.store_command(argv, 'zaqar-delay-groups',
                                      add_parsers)
    try:
        messages = message_controller(store, action.queue, action.project)
        if action.name == 'list':
            marker = None
            while True:
                pages = messages.list_groups(action.queue,
                                             project=action.project,
                                             marker=marker, limit=100)
                page = list(next(pages))
                marker = next(pages)
                for group in page:
                    out.write(json.dumps(group) + '\n')
                if len(page) < 100:
                    return 0
        group = parse_group(action.group)
        if action.name == 'purge':
            count = messages.purge_group(action.queue, group,
                                         project=action.project)
            out.write('purged {} messages\n'.format(count))
        elif action.name == 'unpin':
            client = messages.unpin_group(action.queue, group,
                                          project=action.project)
            out.write('unpinned from {}\n'.format(client) if client
                      else 'not pinned\n')
        else:
            count = messages.move_group(action.queue, group, action.target,
                                        project=action.project)
            out.write('moved {} messages to {}\n'.format(count,
                                                         action.target))
        return 0
    except storage_errors.ExceptionBase as exc:
        sys.stderr.write('error: {}\n'.format(exc))
        return 1


if __name__ == '__main__':
    sys.exit(main())
