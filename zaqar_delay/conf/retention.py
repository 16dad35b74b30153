"""Retention: how long and how many messages a queue keeps (SPEC §5).

``[retention]`` holds the operator's defaults. A section per queue name,
``[retention:<queue>]``, and one per project and queue,
``[retention:<project>/<queue>]``, override them setting by setting; the
most specific section that sets a value wins. Tenants may only tighten
these through the queue metadata ``_retention`` (see
:mod:`zaqar_delay.retention`).

The cleanup daemon's pacing (the seed's expirationd knobs) lives here too;
``zaqar-delay-gc`` takes each as a command-line flag as well.
"""

from oslo_config import cfg

GROUP_NAME = 'retention'
# Prefix of the per-queue override sections.
SECTION_PREFIX = GROUP_NAME + ':'

POLICIES = ('cleanup', 'disabled')
# Upper bound of every count and duration setting (about 68 years).
MAX_SETTING = 2 ** 31 - 1

policy = cfg.StrOpt(
    'policy', default='cleanup', choices=POLICIES,
    help='cleanup: messages past "time" or beyond "length" are no longer '
         'returned by any read and are removed by claims and the cleanup '
         'daemon (zaqar-delay-gc). disabled: retention removes nothing on '
         'the queue; message TTL still holds.')

time = cfg.IntOpt(
    'time', default=0, min=0, max=MAX_SETTING,
    help='Maximum age of a message in seconds, counted from when it was '
         'posted; a message this old or older is no longer kept. 0: no '
         'limit. A claimed message is kept until its claim ends.')

length = cfg.IntOpt(
    'length', default=0, min=0, max=MAX_SETTING,
    help='Maximum number of messages a queue keeps, not counting messages '
         'under a live claim; past it the oldest unclaimed messages (delayed '
         'ones included) go first. 0: no limit.')

consumers_required = cfg.IntOpt(
    'consumers_required', default=None, min=0, max=MAX_SETTING,
    help='Read-by-all cleanup: how many live (not idle) persistent '
         'consumers a queue needs for reading to remove anything. With at '
         'least that many, a message goes once every live one '
         'acknowledged it; with fewer, reading removes nothing. 0: every '
         'live one, or at once when there is none. Unset: no read-based '
         'cleanup.')

tuples_per_iteration = cfg.IntOpt(
    'tuples_per_iteration', default=1000, min=1, max=100000,
    help='Cleanup daemon: messages retention\'s cleanup looks at per '
         'batch, at most (on Redis a batch is several script calls of at '
         'most 100 messages each), so no single operation grows with a '
         'queue. Expired messages are settled in steps of their own.')

full_scan_time = cfg.FloatOpt(
    'full_scan_time', default=60.0, min=0.1, max=86400.0,
    help='Cleanup daemon: seconds a full pass over every queue should take; '
         'after a faster pass the daemon waits out the rest. A queue with '
         'more to remove after a visit of 10 batches is visited again after '
         'the others, in rounds, only while the pass is younger than this, '
         'so that one busy queue cannot hold a pass.')

iteration_delay = cfg.FloatOpt(
    'iteration_delay', default=0.0, min=0.0, max=60.0,
    help='Cleanup daemon: seconds to sleep between two of retention\'s '
         'cleanup batches, to leave the store to clients while a large '
         'backlog is removed.')

consumer_idle_time = cfg.IntOpt(
    'consumer_idle_time', default=86400, min=1, max=MAX_SETTING,
    help='Seconds after which a persistent consumer that has not listed '
         'the queue counts as idle: it no longer holds back read-by-all '
         'cleanup (consumers_required) and is shown as idle. It keeps its '
         'cursor and may resume; what was removed meanwhile is added to '
         'its "lost" count.')

SETTING_OPTS = [policy, time, length, consumers_required]
DAEMON_OPTS = [tuples_per_iteration, full_scan_time, iteration_delay]
ALL_OPTS = SETTING_OPTS + [consumer_idle_time] + DAEMON_OPTS

# In an override section a setting that is absent inherits from the less
# specific one, so none has a default of its own.
OVERRIDE_OPTS = [
    cfg.StrOpt('policy', choices=POLICIES),
    cfg.IntOpt('time', min=0, max=MAX_SETTING),
    cfg.IntOpt('length', min=0, max=MAX_SETTING),
    cfg.IntOpt('consumers_required', min=0, max=MAX_SETTING),
]


def override_sections(conf):
    """``{section suffix: {setting: value}}`` of every ``[retention:...]``
    section in the configuration files, with only the settings it sets."""
    found = {}
    for section in conf.list_all_sections():
        if not section.startswith(SECTION_PREFIX):
            continue
        conf.register_opts(OVERRIDE_OPTS, group=section)
        group = conf[section]
        found[section[len(SECTION_PREFIX):]] = {
            opt.name: group[opt.name] for opt in OVERRIDE_OPTS
            if group[opt.name] is not None}
    return found
