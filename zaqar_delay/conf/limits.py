"""Limits shared with Zaqar's own transport.

``max_message_delay`` is Zaqar's ``[transport] max_message_delay`` option
object itself, not a copy: registering the same object twice is a no-op in
oslo.config, so operators keep one knob, and the drivers still enforce it when
they are used without Zaqar's transport.
"""

from oslo_config import cfg
from zaqar.conf import transport as zaqar_transport

GROUP_NAME = zaqar_transport.GROUP_NAME

max_message_delay = zaqar_transport.max_message_delay

max_group_id_length = cfg.IntOpt(
    'max_group_id_length', default=256, min=1, max=4096,
    help='Longest message group id, in characters, that a message may carry '
         'in the body key named by the queue attribute _message_group_key. '
         'A longer id is refused with an error that names the limit.')

ALL_OPTS = [max_message_delay, max_group_id_length]
