"""Decoding of the message lists that the Lua scripts return."""

import json

from zaqar_delay import controller

# id, body, ttl, created, claim count, claim id, position, group, checksum,
# due (ms)
WIRE_FIELDS = 10


def messages(now_ms, flat, include_created=False):
    """Message dicts from a flat wire list (see ``emit`` in _common.lua)."""
    out = []
    for i in range(0, len(flat), WIRE_FIELDS):
        (mid, body, ttl, created, count, claim, position, _group, checksum,
         due) = flat[i:i + WIRE_FIELDS]
        out.append(controller.basic_message(
            text(mid), json.loads(body), int(ttl), int(created), now_ms,
            int(position), claim_id=text(claim) or None,
            claim_count=int(count), include_created=include_created,
            checksum=text(checksum), delayed=int(due) > now_ms))
    return out


def text(value):
    return value.decode() if isinstance(value, bytes) else value
