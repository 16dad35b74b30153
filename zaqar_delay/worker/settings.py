"""The worker's settings, validated once with errors that name the field,
the value and the bound."""

import dataclasses
import numbers

# Zaqar refuses claim ttl and grace under a minute (transport/validation.py).
MIN_CLAIM_TTL = 60
DAY = 86400
# Zaqar refuses a message whose ttl is under a minute or above
# [transport] max_message_ttl, 14 days unless the operator raised it.
MIN_MESSAGE_TTL = 60
MAX_MESSAGE_TTL = 14 * DAY


def check_int(field, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int) or not (
            low <= value <= high):
        raise ValueError('{} must be an integer from {} to {}; got {!r}'
                         .format(field, low, high, value))
    return value


def check_seconds(field, value, low, high):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            low <= value <= high):
        raise ValueError('{} must be a number of seconds from {} to {}; got '
                         '{!r}'.format(field, low, high, value))
    return value


@dataclasses.dataclass(frozen=True)
class Settings:
    """How the worker claims and retries; the defaults suit most apps.

    ``max_attempts`` and ``retry_delay`` become the type queue's
    ``_max_claim_count`` and ``_redelivery_delay`` (Zaqar's server bounds
    ``retry_delay`` by ``max_message_delay``), so retries survive a crash of
    the worker process.
    """

    #: seconds between claims while a type's queue has nothing due
    poll_interval: float = 1.0
    #: events taken by one claim, made whenever a handler slot is free
    batch_size: int = 10
    #: claim ttl and grace (Zaqar's minimum for both is 60); a handler
    #: running longer has its claim renewed
    claim_ttl: int = 60
    claim_grace: int = 60
    #: seconds between renewals of a claim whose handler still runs
    #: (``None``: half of ``claim_ttl``)
    claim_renew_interval: float = None
    #: handler attempts before an event goes to the dead-letter queue
    max_attempts: int = 3
    #: seconds before a failed event is due again
    retry_delay: int = 10
    #: seconds an event lives after it is due (less when its delay plus
    #: this exceeds ``MAX_MESSAGE_TTL``), and in the dead-letter queue
    event_ttl: int = 3 * DAY
    dead_letter_ttl: int = 7 * DAY
    #: seconds close() waits for running handlers
    close_timeout: float = 30.0
    #: seconds between reads of queue stats for the depth gauges
    stats_interval: float = 10.0

    @property
    def renew_interval(self):
        if self.claim_renew_interval is None:
            return self.claim_ttl / 2
        return self.claim_renew_interval

    def __post_init__(self):
        check_seconds('poll_interval', self.poll_interval, 0.01, 3600)
        check_int('batch_size', self.batch_size, 1, 20)
        check_int('claim_ttl', self.claim_ttl, MIN_CLAIM_TTL, 12 * 3600)
        check_int('claim_grace', self.claim_grace, MIN_CLAIM_TTL, 12 * 3600)
        if self.claim_renew_interval is not None:
            check_seconds('claim_renew_interval', self.claim_renew_interval,
                          0.1, self.claim_ttl - 1)
        check_int('max_attempts', self.max_attempts, 1, 1000)
        check_int('retry_delay', self.retry_delay, 0, 14 * DAY)
        check_int('event_ttl', self.event_ttl, 60, 14 * DAY)
        check_int('dead_letter_ttl', self.dead_letter_ttl, 60, 14 * DAY)
        check_seconds('close_timeout', self.close_timeout, 0, 24 * 3600)
        check_seconds('stats_interval', self.stats_interval, 0.1, 24 * 3600)
