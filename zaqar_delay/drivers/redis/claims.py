"""Claims on Redis: claim, renew and release are each one Lua script."""

import json
import uuid

from zaqar.storage import errors as storage_errors

from zaqar_delay import controller
from zaqar_delay import rules
from zaqar_delay.drivers.redis import keys
from zaqar_delay.drivers.redis import wire


class ClaimController(controller.ClaimController):

    def __init__(self, driver):
        super().__init__(driver)
        self._run = driver.run_script

    def _claim(self, queue, project, ttl, grace, limit, policy):
        return self.take(queue, project, limit, policy, 'claim', ttl, grace)

    def take(self, queue, project, limit, policy, mode, ttl=0, grace=0):
        """Claim or pop in one script; then finish any dead-letter moves."""
        claim_id = str(uuid.uuid4())
        now, flat, dead = self._run(
            'claim', queue, project, claim_id, ttl, grace, limit,
            policy.max_claim_count, int(policy.dead_letter_queue is not None),
            policy.redelivery_delay, mode)
        if dead:
            self.dead_letter(queue, project, policy,
                             [wire._text(mid) for mid in dead])
        return claim_id, wire.messages(now, flat)

    def dead_letter(self, queue, project, policy, message_ids):
        """Copy outbox messages into the dead-letter queue, then forget them.

        The copy keeps each message's id and the dead-letter insert skips ids
        it already holds, so a move interrupted between the two steps is
        finished later by ``gc`` without loss and without a duplicate.
        """
        client = self.driver.connection
        stored = self.driver.guarded(lambda: [
            client.hmget(keys.message_key(queue, project, mid),
                         'b', 't', 'u') for mid in message_ids])
        dlq = policy.dead_letter_queue
        messages_ctrl = self.driver.message_controller
        try:
            dlq_policy = messages_ctrl.policy(dlq, project)
        except storage_errors.QueueDoesNotExist:
            self.driver.queue_controller.create(dlq, project=project)
            dlq_policy = rules.QueuePolicy()
        by_client = {}
        for mid, (body_json, ttl, client_uuid) in zip(message_ids, stored):
            if body_json is None:
                continue
            body = json.loads(body_json)
            by_client.setdefault(client_uuid.decode(), []).append(
                rules.NewMessage(
                    id=mid, ttl=policy.dead_letter_ttl or int(ttl), delay=0,
                    body=body, body_json=body_json.decode(),
                    group=rules.group_or_none(body, dlq_policy)))
        for client_uuid, moved in by_client.items():
            messages_ctrl._insert(dlq, project, moved, client_uuid)
        self._run('dead_done', queue, project, *message_ids)

    def _get_claim(self, queue, project, claim_id):
        found = self._run('claim_get', queue, project, claim_id)
        if not found:
            return None
        now, ttl, expires, flat = found
        meta = {'id': claim_id, 'ttl': int(ttl),
                'age': max(0, (now - (int(expires) - int(ttl) * 1000))
                           // 1000)}
        return meta, wire.messages(now, flat)

    def _renew(self, queue, project, claim_id, ttl, grace):
        return self._run('claim_renew', queue, project, claim_id, ttl,
                         grace) == 1

    def _release(self, queue, project, claim_id):
        self._run('claim_release', queue, project, claim_id)
