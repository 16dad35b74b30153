"""Limits shared with Zaqar's own transport.

Each is Zaqar's ``[transport]`` option object itself, not a copy:
registering the same object twice is a no-op in oslo.config, so operators
keep one knob per limit, and the drivers still enforce them when they are
used without Zaqar's transport (zaqar-delay-groups, other tools, tests).
"""

from zaqar.conf import transport as zaqar_transport

GROUP_NAME = zaqar_transport.GROUP_NAME

max_message_delay = zaqar_transport.max_message_delay
max_message_ttl = zaqar_transport.max_message_ttl
max_claim_ttl = zaqar_transport.max_claim_ttl
max_claim_grace = zaqar_transport.max_claim_grace
max_messages_per_claim_or_pop = zaqar_transport.max_messages_per_claim_or_pop
max_messages_per_page = zaqar_transport.max_messages_per_page

ALL_OPTS = [max_message_delay, max_message_ttl, max_claim_ttl,
            max_claim_grace, max_messages_per_claim_or_pop,
            max_messages_per_page]
# What oslo-config-generator lists under our namespace: the limit this
# package gives a new meaning to. The rest Zaqar's own namespace lists.
LISTED_OPTS = [max_message_delay]
