"""Sticky consumers: on a queue with ``_message_group_sticky``, a group's
messages go to the client that claimed (or popped) one of them, while that
client stays active on the queue (docs/usage.md, "Sticky consumers").

Zaqar's storage API passes no client to a claim or a pop. Its WSGI layer
keeps the request context, with the request's ``Client-ID``, in
oslo.context's thread-local store (``zaqar.common.transport.wsgi.helpers.
inject_context``); :func:`current_client` reads it from there. A caller of
the storage API names its client with :func:`acting_as`::

    with sticky.acting_as(client_id):
        claim_controller.create(queue, {'ttl': 60}, project=project)
"""

import contextlib
import contextvars

from oslo_context import context as oslo_context

from zaqar_delay import errors

_ACTING_AS = contextvars.ContextVar('zaqar_delay_sticky_client',
                                    default=None)


@contextlib.contextmanager
def acting_as(client_id):
    """Claims, pops, renewals and deletes inside the block are made by
    ``client_id`` (a Zaqar Client-ID), whatever the request context says."""
    if not client_id:
        raise errors.invalid_field('client id', client_id,
                                   'a non-empty Client-ID')
    token = _ACTING_AS.set(str(client_id))
    try:
        yield
    finally:
        _ACTING_AS.reset(token)


def current_client():
    """The client making this call: the one :func:`acting_as` names, else
    the Client-ID of Zaqar's request context, else None."""
    named = _ACTING_AS.get()
    if named is not None:
        return named
    context = oslo_context.get_current()
    client_id = getattr(context, 'client_id', None)
    return str(client_id) if client_id else None


def client_for(queue, policy):
    """The client a claim or pop on ``queue`` is made for: None on a queue
    that is not sticky; raises InvalidInput (400) on a sticky queue when no
    client is known, rather than hand out a group to nobody."""
    if not policy.sticky:
        return None
    client_id = current_client()
    if client_id is None:
        raise errors.InvalidInput(
            'queue {!r} has _message_group_sticky: a claim or pop must name '
            'its client (the Client-ID header, or zaqar_delay.sticky.'
            'acting_as for storage-API callers)'.format(queue))
    return client_id
