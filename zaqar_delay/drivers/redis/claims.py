"""Claims on Redis: claim, renew and release are each one Lua script."""

import uuid

from oslo_log import log as logging

from zaqar_delay import controller
from zaqar_delay import sticky
from zaqar_delay.drivers.redis import messages
from zaqar_delay.drivers.redis import outbox
from zaqar_delay.drivers.redis import wire

LOG = logging.getLogger(__name__)


class ClaimController(controller.ClaimController):

    def __init__(self, driver):
        super().__init__(driver)
        self._run = driver.run_script

    def _claim(self, queue, project, ttl, grace, limit, policy):
        return self.take(queue, project, limit, policy, 'claim', ttl, grace)

    def take(self, queue, project, limit, policy, mode, ttl=0, grace=0):
        """Claim or pop in one script; then finish its dead-letter moves.

        The claim id is also the call's token: a retry after a lost reply
        sends the same one, and the script returns the batch it took then.
        """
        claim_id = str(uuid.uuid4())
        now, flat, dead = self._run(
            'claim', queue, project, claim_id, ttl, grace, limit,
            policy.max_claim_count, policy.dead_letter_queue or '',
            policy.redelivery_delay, mode,
            '' if policy.dead_letter_ttl is None else policy.dead_letter_ttl,
            self.driver.retry_span_ms, self.driver.deleted_id_memory_ms,
            *messages.retention_args(policy.retention),
            policy.client or '', policy.sticky * 1000, keeps_result=True)
        try:
            outbox.transfer(self.driver, queue, project,
                            [wire.text(mid) for mid in dead])
        except Exception:
            # The script has taken the batch: failing now would lose it
            # (a pop) or hide it under a claim nobody knows. The dead
            # letters wait in the outbox, which gc empties.
            LOG.exception('Dead letters of queue %s (project %s) left in its '
                          'outbox for gc', queue, project)
        return claim_id, wire.messages(now, flat)

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
                         grace, sticky.current_client() or '') == 1

    def _release(self, queue, project, claim_id):
        self._run('claim_release', queue, project, claim_id)
