"""An in-memory reference implementation of the message contract.

Used only by tests: the property-based test drives it and a real backend
with the same operations and clock, and compares what they hand out. It
states the rules of SPEC sections 3, 4 and 6 as plainly as possible, with
no regard for cost.
"""

import dataclasses


@dataclasses.dataclass
class Message:
    position: int
    body: dict
    expires: int
    due: int
    group: object = None
    claim: str = None
    claim_expires: int = 0
    redelivery: int = 0


class ReferenceQueue:
    """One queue with a default delay, a group key and a redelivery delay
    (all times in epoch ms, delays in seconds)."""

    def __init__(self, default_delay, group_key, redelivery_delay):
        self.default_delay = default_delay
        self.group_key = group_key
        self.redelivery_delay = redelivery_delay
        self.messages = []
        self.positions = 0

    def _settle(self, now):
        for message in self.messages:
            if message.claim and message.claim_expires <= now:
                message.claim = None
                message.due = (message.claim_expires
                               + message.redelivery * 1000)
        self.messages = [m for m in self.messages if m.expires > now]

    def post(self, now, body, ttl, delay=None):
        self._settle(now)
        self.positions += 1
        delay = self.default_delay if delay is None else delay
        self.messages.append(Message(
            position=self.positions, body=body, expires=now + ttl * 1000,
            due=now + delay * 1000, group=body.get(self.group_key)))

    def _heads(self):
        """The first live message of each group."""
        heads = {}
        for message in self.messages:
            if message.group is not None:
                heads.setdefault(message.group, message)
        return heads

    def claim(self, now, claim_id, limit, ttl, grace):
        self._settle(now)
        heads = self._heads()
        taken = []
        for message in self.messages:
            if len(taken) == limit:
                break
            blocked = (message.group is not None
                       and heads[message.group] is not message)
            if message.claim or message.due > now or blocked:
                continue
            message.claim = claim_id
            message.claim_expires = now + ttl * 1000
            message.redelivery = self.redelivery_delay
            message.expires = max(message.expires,
                                  message.claim_expires + grace * 1000)
            taken.append(message)
        return [m.body for m in taken]

    def delete(self, now, body):
        self._settle(now)
        self.messages = [m for m in self.messages if m.body != body]

    def release(self, now, claim_id):
        self._settle(now)
        for message in self.messages:
            if message.claim == claim_id:
                message.claim = None
                message.due = now + message.redelivery * 1000

    def total(self, now):
        self._settle(now)
        return len(self.messages)

    def claimed_by(self, now, claim_id):
        self._settle(now)
        return [m.body for m in self.messages if m.claim == claim_id]
