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

    def take(self, queue, project, limit, policy, mode, ttl=0, grace=0,
             until_found=False):
        """Claim or pop in one script; then finish its dead-letter moves.

        The claim id is also the call's token: a retry after a lost reply
        sends the same one, and the script returns the batch it took then.
        ``until_found`` (pops): a script that took nothing but stopped at
        a bound of its work is run again, each run a call of its own that
        moves past what the last one met (expired messages, dead letters,
        hidden heads, and for Zaqar's purge pins to free).
        """
        while True:
            claim_id = str(uuid.uuid4())
            now, flat, dead, *more = self._run(
                'claim', queue, project, claim_id, ttl, grace, limit,
                policy.max_claim_count, policy.dead_letter_queue or '',
                policy.redelivery_delay, mode,
                '' if policy.dead_letter_ttl is None
                else policy.dead_letter_ttl,
                self.driver.retry_span_ms, self.driver.deleted_id_memory_ms,
                *messages.retention_args(policy.retention),
                policy.client or '', policy.sticky * 1000, keeps_result=True)
            self._send_dead_letters(queue, project, dead)
            # (A result kept from a script before "more" has three parts.)
            if flat or not until_found or not (more and more[0]):
                return claim_id, wire.messages(now, flat)

    def _send_dead_letters(self, queue, project, dead):
        try:
            outbox.transfer(self.driver, queue, project,
                            [wire.text(mid) for mid in dead])
        except Exception:
            # The script has taken the batch: failing now would lose it
            # (a pop) or hide it under a claim nobody knows. The dead
            # letters wait in the outbox, which gc empties.
            LOG.exception('Dead letters of queue %s (project %s) left in its '
                          'outbox for gc', queue, project)

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
