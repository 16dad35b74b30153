"""Finishing moves between queues: dead letters and moved groups.

A script detaches messages into the source queue's outbox (atomically, in
the source's hash slot); this module copies them into the queue each entry
names, then tells the source to forget them. The copy keeps each message's
id and the insert skips ids the target already holds, so a move interrupted
between the two steps is finished later by ``gc`` without loss and without a
duplicate.
"""

import json

from zaqar_delay import rules
from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import wire

OUTBOX_FIELDS = ('b', 'u', 'to', 'tt', 'td', 'ob')


def transfer(driver, queue, project, message_ids):
    """Copy outbox entries to their target queues, in position order."""
    if not message_ids:
        return
    def read(pipe):
        for mid in message_ids:
            pipe.hmget(keys.message_key(queue, project, mid), OUTBOX_FIELDS)

    # One insert per run of entries with one target and one poster, in
    # the order given, so the target receives them in position order.
    runs = []
    for mid, fields in zip(message_ids, driver.pipelined(read)):
        if fields[0] is None:
            continue
        body_json, client_uuid, target, ttl, delay, left = (
            wire.text(value) for value in fields)
        entry = (mid, body_json, int(ttl), int(delay),
                 None if left is None else int(left))
        if runs and runs[-1][0] == (target, client_uuid):
            runs[-1][1].append(entry)
        else:
            runs.append(((target, client_uuid), [entry]))
    messages = driver.message_controller
    for (target, client_uuid), entries in runs:
        policy = driver.message_controller.target_policy(target, project)
        moved = [rules.NewMessage(
            id=mid, ttl=ttl, delay=delay, body=json.loads(body_json),
            body_json=body_json,
            group=rules.group_or_none(json.loads(body_json), policy))
            for mid, body_json, ttl, delay, _ in entries]
        # The latest time one of them entered the outbox: an id that left
        # the target after that was copied there by this entry (the copy
        # retried after its reply was lost, or made again by gc), and is
        # not stored again. (Entries an earlier release wrote have no
        # time: none is skipped that way then.)
        left = [entry[4] for entry in entries]
        messages._insert(target, project, moved, client_uuid,
                         None if None in left else max(left))
    driver.run_script('outbox_done', queue, project, *message_ids)
