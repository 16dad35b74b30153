"""An in-memory reference implementation of the message contract.

Used only by tests: the property-based test drives it and a real backend
with the same operations and clock, and compares what they hand out. It
states the rules of SPEC sections 3, 4, 5 (retention by time and length)
and 6 as plainly as possible, with no regard for cost.
"""

import dataclasses


@dataclasses.dataclass
class Message:
    position: int
    body: dict
    expires: int
    due: int
    created: int = 0
    group: object = None
    claim: str = None
    claim_expires: int = 0
    redelivery: int = 0


class ReferenceQueue:
    """One queue with a default delay, a group key, a redelivery delay and
    retention ``time`` and ``length`` (0: none), all times in epoch ms,
    delays and ``time`` in seconds."""

    def __init__(self, default_delay, group_key, redelivery_delay,
                 time=0, length=0):
        self.default_delay = default_delay
        self.group_key = group_key
        self.redelivery_delay = redelivery_delay
        self.time = time
        self.length = length
        self.messages = []
        self.positions = 0

    def _settle(self, now):
        for message in self.messages:
            if message.claim and message.claim_expires <= now:
                message.claim = None
                message.due = (message.claim_expires
                               + message.redelivery * 1000)
        self.messages = [m for m in self.messages if m.expires > now]
        self._retain(now)

    def _retain(self, now):
        """Remove what retention no longer keeps: unclaimed messages
        ``time`` old, then all but the newest ``length`` unclaimed ones.
        Removed at once, so nothing comes back when newer ones leave."""
        if self.time:
            self.messages = [m for m in self.messages
                             if m.claim or m.created + self.time * 1000 > now]
        free = [m for m in self.messages if not m.claim]
        if self.length and len(free) > self.length:
            gone = {id(m) for m in free[:-self.length]}
            self.messages = [m for m in self.messages if id(m) not in gone]

    def post(self, now, body, ttl, delay=None):
        self._settle(now)
        self.positions += 1
        delay = self.default_delay if delay is None else delay
        self.messages.append(Message(
            position=self.positions, body=body, expires=now + ttl * 1000,
            due=now + delay * 1000, created=now,
            group=body.get(self.group_key)))
        self._retain(now)

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

    def bodies(self, now):
        """Every live message, claimed and delayed ones included."""
        self._settle(now)
        return [m.body for m in self.messages]

    def claimed_by(self, now, claim_id):
        self._settle(now)
        return [m.body for m in self.messages if m.claim == claim_id]
