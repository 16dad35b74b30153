"""``zaqar-delay-consumers``: a queue's persistent consumers (SPEC §5).

Reads the same ``zaqar.conf`` as ``zaqar-server`` (``--config-file``) and
talks to the message store directly, as ``zaqar-gc`` does::

    zaqar-delay-consumers --config-file zaqar.conf list   PROJECT QUEUE
    zaqar-delay-consumers --config-file zaqar.conf show   PROJECT QUEUE ID
    zaqar-delay-consumers --config-file zaqar.conf remove PROJECT QUEUE ID

``list`` and ``show`` print one JSON object per consumer: its consume_id,
cursor, lag (kept messages after the cursor), lost, last_active_age
(seconds) and idle. ``remove`` deletes the consumer's subscription (the
consumer goes with it), or only the consumer's state when its
subscription is gone already.
"""

import json
import sys

from zaqar.storage import errors as storage_errors

from zaqar_delay import cmd
from zaqar_delay import consumers

ACTIONS = {'list': 2, 'show': 3, 'remove': 3}


def add_parsers(subparsers):
    for action, count in ACTIONS.items():
        parser = subparsers.add_parser(action)
        for name in ('project', 'queue', 'consume_id')[:count]:
            parser.add_argument(name)


class NoSuchConsumer(Exception):
    pass


def report(messages, queue, project, consume_id):
    found = messages.consumer_report(queue, project, consume_id)
    if found is None:
        raise NoSuchConsumer(
            'queue {} of project {} has no persistent consumer {}'.format(
                queue, project, consume_id))
    return dict({'consume_id': consume_id}, **found)


def remove(driver, queue, project, consume_id):
    report(driver.message_controller, queue, project, consume_id)
    subscriber = consumers.PREFIX + consume_id
    subscriptions = driver.subscription_controller
    found = subscriptions.get_with_subscriber(queue, subscriber, project)
    if found:
        subscriptions.delete(queue, found['id'], project=project)
    else:
        driver.message_controller.forget_consumer(queue, project,
                                                  subscriber)


def main(argv=None, out=sys.stdout):
    action, driver = cmd.store_command(argv, 'zaqar-delay-consumers',
                                       add_parsers)
    messages = driver.message_controller
    try:
        if action.name == 'list':
            _, found = messages.list_consumers(action.queue, action.project)
            for consumer in sorted(found, key=lambda c: c.consume_id):
                out.write(json.dumps(report(
                    messages, action.queue, action.project,
                    consumer.consume_id)) + '\n')
        elif action.name == 'show':
            out.write(json.dumps(report(messages, action.queue,
                                        action.project,
                                        action.consume_id)) + '\n')
        else:
            remove(driver, action.queue, action.project, action.consume_id)
            out.write('removed {}\n'.format(action.consume_id))
        return 0
    except (storage_errors.ExceptionBase, NoSuchConsumer) as exc:
        sys.stderr.write('error: {}\n'.format(exc))
        return 1


if __name__ == '__main__':
    sys.exit(main())
