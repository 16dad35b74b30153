"""Each backend against the reference implementation (tests/reference.py).

Hypothesis drives random sequences of posts (grouped or not, with or without
their own delay), claims, deletes, releases and clock moves against a real
backend and the reference at once, on a queue with or without retention
(``_retention`` time and length), and checks that they hand out the same
messages in the same order and agree on which are left.
"""

import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize,
                                 invariant, precondition, rule,
                                 run_state_machine_as_test)

from tests.contract.helpers import CLIENT, bodies, listed
from tests.reference import ReferenceQueue

POLICY = {'_default_message_delay': 10, '_message_group_key': 'g',
          '_redelivery_delay': 5}
EXAMPLES = {'swift': 6}


def test_backend_behaves_like_the_reference(driver, project, clock,
                                            backend_name):
    class Machine(RuleBasedStateMachine):

        @initialize(time=st.sampled_from([0, 45]),
                    length=st.sampled_from([0, 3]))
        def fresh_queue(self, time, length):
            self.queue = 'model-' + uuid.uuid4().hex[:8]
            metadata = dict(POLICY, _retention={'time': time,
                                                'length': length})
            driver.queue_controller.create(self.queue, metadata=metadata,
                                           project=project)
            self.model = ReferenceQueue(10, 'g', 5, time, length)
            self.serial = 0
            self.claims = {}

        @rule(group=st.sampled_from([None, 'a', 'b', 7]),
              delay=st.sampled_from([None, 0, 30]),
              ttl=st.sampled_from([60, 200]))
        def post(self, group, delay, ttl):
            self.serial += 1
            body = {'n': self.serial}
            if group is not None:
                body['g'] = group
            message = {'ttl': ttl, 'body': body}
            if delay is not None:
                message['delay'] = delay
            driver.message_controller.post(self.queue, [message], CLIENT,
                                           project=project)
            self.model.post(clock(), body, ttl, delay)

        @rule(limit=st.integers(1, 3), ttl=st.sampled_from([20, 60]))
        def claim(self, limit, ttl):
            claim_id, messages = driver.claim_controller.create(
                self.queue, {'ttl': ttl, 'grace': 0}, project=project,
                limit=limit)
            got = [m['body'] for m in messages]
            expected = self.model.claim(clock(), claim_id, limit, ttl, 0)
            assert got == expected
            if claim_id:
                self.claims[claim_id] = [m['id'] for m in messages]

        @precondition(lambda self: self.claims)
        @rule(data=st.data())
        def delete_one(self, data):
            claim_id = data.draw(st.sampled_from(sorted(self.claims)))
            live = self.model.claimed_by(clock(), claim_id)
            if not live:
                return
            body = data.draw(st.sampled_from(live))
            message_id = next(
                m['id'] for m in driver.claim_controller.get(
                    self.queue, claim_id, project=project)[1]
                if m['body'] == body)
            driver.message_controller.delete(self.queue, message_id,
                                             project=project, claim=claim_id)
            self.model.delete(clock(), body)

        @precondition(lambda self: self.claims)
        @rule(data=st.data())
        def release(self, data):
            claim_id = data.draw(st.sampled_from(sorted(self.claims)))
            driver.claim_controller.delete(self.queue, claim_id,
                                           project=project)
            self.model.release(clock(), claim_id)

        @rule(seconds=st.sampled_from([1, 5, 10, 25, 60]))
        def advance(self, seconds):
            clock.advance(seconds)

        @invariant()
        def same_number_left(self):
            if hasattr(self, 'model'):
                stats = driver.message_controller.stats(self.queue,
                                                         project)['messages']
                assert stats['total'] == self.model.total(clock())

        @invariant()
        def same_messages_listed(self):
            if hasattr(self, 'model'):
                assert bodies(listed(driver, self.queue, project,
                                     include_claimed=True,
                                     include_delayed=True)) == \
                    self.model.bodies(clock())

    run_state_machine_as_test(Machine, settings=settings(
        max_examples=EXAMPLES.get(backend_name, 25), stateful_step_count=25,
        deadline=None, derandomize=True))
