"""The ``[zaqar_delay]`` group of tempest.conf."""

from oslo_config import cfg

GROUP_NAME = 'zaqar_delay'

group = cfg.OptGroup(name=GROUP_NAME,
                     title='zaqar-delay storage drivers under Zaqar')

ALL_OPTS = [
    cfg.IntOpt('max_message_delay', default=900, min=1,
               help='The cloud\'s [transport] max_message_delay in '
                    'zaqar.conf: the largest delay the tests expect to be '
                    'accepted; one second more must be refused.'),
    cfg.IntOpt('due_timeout', default=60, min=5,
               help='Seconds to wait for a message with a one-second delay '
                    'or redelivery delay to become claimable before a test '
                    'fails.'),
]


def list_opts():
    return [(group, ALL_OPTS)]
