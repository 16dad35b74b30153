"""Limits shared with Zaqar's own transport.

``max_message_delay`` is Zaqar's ``[transport] max_message_delay`` option
object itself, not a copy: registering the same object twice is a no-op in
oslo.config, so operators keep one knob, and the drivers still enforce it when
they are used without Zaqar's transport.
"""

from zaqar.conf import transport as zaqar_transport

GROUP_NAME = zaqar_transport.GROUP_NAME

max_message_delay = zaqar_transport.max_message_delay

ALL_OPTS = [max_message_delay]
