"""Retention settings of a queue (SPEC §5), shared by every backend.

What a queue keeps is decided here once: the operator's settings (the
``[retention]`` defaults, overridden per queue and per project and queue),
tightened by the tenant's ``_retention`` queue metadata. Backends get a
:class:`Retention` and apply its rules exactly at read time:

* a message is *kept by time* while ``created + time > now`` (a message
  exactly ``time`` old is gone, as a message whose ``expires`` is now);
* of the live messages that are not under a live claim, delayed ones
  included, only the newest ``length`` (by position) are *kept by length*;
* a message under a live claim is always kept until its claim ends;
* nothing else applies with ``policy`` ``disabled`` (or time and length 0).

A message that is not kept is returned by no read (claim, pop, list, get,
first, stats) and is removed by whichever operation meets it first (claims
in bounded batches, the cleanup daemon); each removal is counted once in
the queue's ``removed`` statistic. A dead-letter or group move is not a
retention removal.
"""

import dataclasses

from zaqar_delay import errors
from zaqar_delay import rules
from zaqar_delay.conf import retention as options

# Queue metadata key through which a tenant tightens its queue's retention.
METADATA_KEY = '_retention'

CLEANUP, DISABLED = options.POLICIES


@dataclasses.dataclass(frozen=True)
class Retention:
    """Effective retention of one queue."""

    policy: str = CLEANUP
    time: int = 0
    length: int = 0
    consumers_required: int = None
    # Read-by-all (consumers.read_through): the last position every
    # required persistent consumer has acknowledged; None: nothing is read
    # by all. Filled in for reads, never for writes.
    read_through: int = None

    @property
    def read_cut(self):
        """Messages at or before this position are read by all and no
        longer kept (unless claimed); None when read-by-all removes
        nothing."""
        return self.read_through if self.policy == CLEANUP else None

    @property
    def active(self):
        """True when time, length or read-by-all can remove anything (the
        backends skip all retention work, cleanup included, otherwise)."""
        return self.policy == CLEANUP and bool(
            self.time or self.length or self.read_through is not None)

    @property
    def time_ms(self):
        """The age limit in ms, 0 when age removes nothing."""
        return self.time * 1000 if self.active else 0

    @property
    def kept_length(self):
        """The length limit, 0 when length removes nothing."""
        return self.length if self.active else 0

    def report(self, removed):
        """The ``retention`` entry of queue stats."""
        return {'policy': self.policy, 'time': self.time,
                'length': self.length,
                'consumers_required': self.consumers_required,
                'removed': removed}


NONE = Retention()


class OperatorRetention:
    """The operator's retention settings, read once from ``conf`` (which
    must have :mod:`zaqar_delay.conf.retention` registered)."""

    def __init__(self, conf):
        group = conf[options.GROUP_NAME]
        self._defaults = {opt.name: group[opt.name]
                          for opt in options.SETTING_OPTS}
        self._sections = options.override_sections(conf)

    def for_queue(self, queue, project):
        """The operator's settings for ``queue`` of ``project``: the
        defaults, then ``[retention:<queue>]``, then
        ``[retention:<project>/<queue>]``."""
        settings = dict(self._defaults)
        settings.update(self._sections.get(queue, {}))
        if project:
            settings.update(self._sections.get(
                '{}/{}'.format(project, queue), {}))
        return Retention(**settings)


def from_metadata(metadata, operator):
    """The effective retention of a queue whose operator settings are
    ``operator``, tightened by ``metadata[METADATA_KEY]``.

    Strict: a ``_retention`` that is malformed or would loosen what the
    operator set raises InvalidInput naming the field, the value and the
    bound. Used where metadata is set and on writes.
    """
    value = (metadata or {}).get(METADATA_KEY)
    if value is None:
        return operator
    if not isinstance(value, dict):
        raise errors.invalid_field(METADATA_KEY, value, 'an object')
    unknown = sorted(set(value) - {opt.name for opt in
                                   options.SETTING_OPTS})
    if unknown:
        raise errors.InvalidInput(
            '{} has no setting {!r}; it takes policy, time, length and '
            'consumers_required'.format(METADATA_KEY, unknown[0]))
    # Only settings that remove something bind the tenant: under an
    # operator policy that removes nothing, "disabled" loosens nothing.
    enforced = operator.policy == CLEANUP and (
        operator.active or operator.consumers_required is not None)
    policy = value.get('policy', operator.policy)
    if policy not in options.POLICIES or (enforced and policy != CLEANUP):
        allowed = options.POLICIES if not enforced else (CLEANUP,)
        raise errors.invalid_field(
            METADATA_KEY + '.policy', policy,
            ' or '.join(repr(p) for p in allowed) + (
                ' (the operator keeps retention on for this queue)'
                if enforced else ''))
    settings = {'policy': policy}
    for name in ('time', 'length'):
        bound = getattr(operator, name) if enforced else 0
        settings[name] = _tightened(name, value, bound, default=bound)
    required = operator.consumers_required
    settings['consumers_required'] = _tightened(
        'consumers_required', value, required or 0, default=required,
        zero_is_unlimited=False)
    return Retention(**settings)


def _tightened(name, value, bound, default, zero_is_unlimited=True):
    """``value[name]`` checked against the operator's ``bound``: with a
    bound, at most it (and, where 0 means "unlimited", at least 1)."""
    if name not in value:
        return default
    field = '{}.{}'.format(METADATA_KEY, name)
    unit = ' seconds' if name == 'time' else ''
    if not bound and (zero_is_unlimited or default is None):
        return rules.check_int(field, value[name], 0, options.MAX_SETTING,
                               unit=unit)
    low = 1 if zero_is_unlimited else 0
    try:
        return rules.check_int(field, value[name], low, bound, unit=unit)
    except errors.InvalidInput as exc:
        raise errors.InvalidInput(
            '{} (the operator\'s limit for this queue; a tenant may only '
            'tighten it)'.format(exc))


def for_reads(metadata, operator):
    """Like :func:`from_metadata`, but never raises: reads and cleanup go
    on with the operator's settings when the stored ``_retention`` is
    malformed or loosens them (it was stored before it was checked, or
    the operator tightened the configuration since)."""
    try:
        return from_metadata(metadata, operator)
    except errors.InvalidInput:
        return operator
