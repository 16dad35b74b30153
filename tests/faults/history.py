"""Recording a history of driver calls, and checking it afterwards.

Every process appends one JSON line per call to its own file, flushed at
once, so a SIGKILL loses at most the call in flight. A line holds the
operation, the queue, the wall-clock times before the call went out and
after it came back (``t0``, ``t1``: the store executed it somewhere in
between; Redis ``TIME`` and the API node's clock are this machine's clock),
the same in ``time.monotonic()`` (``m0``, ``m1``), and the outcome:

* ``ok`` - the call returned;
* ``refused`` - a Zaqar storage error that says the store did nothing
  (message claimed by another claim, ...);
* ``error`` - a storage error saying the store was unreachable (or a reply
  was lost): the call may or may not have taken effect;
* ``crash`` - an exception that is not a Zaqar storage error: like
  ``error``, and a violation of its own (``not_a_storage_error``: SPEC §8
  wants backend faults to reach Zaqar as storage errors, not as a 500);
* ``killed`` - the call began (a line is written before each call) but its
  process was SIGKILLed before it returned: like ``error``.

A call that returned while the Redis driver logged that its replica did
not confirm the writes in time (``replica_acks``: "acknowledged anyway")
is also marked ``unconfirmed``: a failover may lose those writes, as the
option's help says, so such a post is not taken as acknowledged, such a
pop or delete as a certain deletion, nor such a claim as certainly held.

Messages are known by a tag in their body (``t``), as a failed post never
tells its ids. The checks (``check``) only conclude what the brackets
prove, so a noisy machine cannot produce a false violation:

* ``lost`` - a message that exists (its post was acknowledged, or it was
  handed out) was never consumed: no pop returned it and no delete of it
  was sent that succeeded or may have run, although the run ended with a
  drain of every queue. Each comes with the number of failed pops on its
  queue (or its dead-letter queue) since it was posted: a failed pop that
  took it is the usual cause.
* ``two_live_claims`` - two hand-outs of one message that no order allows:
  after a claim of ttl T executed at t (>= its t0), the next hand-out can
  execute only from t + T; after a pop, never.
* ``after_deletion`` - a hand-out that began after a delete of the same
  message had returned successfully, or after another pop returned it.
  On a queue with a dead-letter queue, a delete sent with a claim that
  may have ended before the delete ran proves nothing: the message may
  have been dead-lettered first, and Zaqar answers 204 for a message that
  is no longer there.
* ``early`` - a hand-out that returned before its post was even sent plus
  the message's delay.
* ``group_order`` - a hand-out of a group member that returned before an
  earlier member of its group had even begun to be deleted.
"""

import collections
import glob
import json
import logging
import os
import time
import traceback

from zaqar.storage import errors as storage_errors

# Redis stamps times in whole milliseconds.
TOLERANCE_S = 0.002


def classify(exc):
    """``refused`` when the store certainly did nothing, ``error`` for a
    storage error that may have left the call done, ``crash`` for an
    exception that is not a Zaqar storage error (Zaqar answers 500)."""
    if not isinstance(exc, storage_errors.ExceptionBase):
        return 'crash'
    if isinstance(exc, storage_errors.ConnectionError):
        return 'error'
    return 'refused'


class _Unconfirmed(logging.Handler):
    """Counts the Redis driver's warnings that writes were acknowledged
    without the replica confirming them (RedisDriver.pipelined)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record):
        if record.getMessage().startswith('Redis WAIT:'):
            self.count += 1


_UNCONFIRMED = _Unconfirmed()
logging.getLogger('zaqar_delay.drivers.redis.driver').addHandler(
    _UNCONFIRMED)


class Recorder:
    """Appends JSON lines to ``path``: one when a call begins (``begin``),
    one with its outcome when it returns, both with the call's ``seq``."""

    def __init__(self, path, who):
        self.who = who
        self._file = open(path, 'a', buffering=1)
        self._seq = 0

    def write(self, record):
        record['who'] = self.who
        self._file.write(json.dumps(record, separators=(',', ':')) + '\n')

    def call(self, op, queue, fn, **fields):
        """Run ``fn()``; return (outcome, result or None, record). The
        caller adds what the result says and ``write``s the record."""
        self._seq += 1
        record = dict(fields, op=op, q=queue, seq=self._seq, t0=time.time(),
                      m0=time.monotonic())
        self.write(dict(record, begin=True))
        warned = _UNCONFIRMED.count
        try:
            result, outcome = fn(), 'ok'
        except Exception as exc:  # recorded, classified, never hidden
            result, outcome = None, classify(exc)
            record['err'] = '{}: {}'.format(type(exc).__name__, exc)[:300]
            if outcome == 'crash':
                record['at'] = _innermost_zaqar_frame(exc)
        record.update(t1=time.time(), m1=time.monotonic(), outcome=outcome)
        if _UNCONFIRMED.count > warned:
            record['unconfirmed'] = True
        return outcome, result, record

    def close(self):
        self._file.close()


def _innermost_zaqar_frame(exc):
    """``module.py:line in function`` of the deepest frame of Zaqar or
    zaqar-delay an exception passed through: which call let it out."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if '/zaqar' in f.filename]
    if not frames:
        return None
    frame = frames[-1]
    return '{}:{} in {}'.format(frame.filename.rsplit('site-packages/')[-1],
                                frame.lineno, frame.name)


def load(directory):
    """Every record of a run. A call that began but never returned (its
    process was killed) has outcome ``killed``: it may have run."""
    records = []
    for path in sorted(glob.glob(os.path.join(directory, '*.jsonl'))):
        begun = {}
        with open(path) as f:
            for line in f:
                # A process killed mid-write leaves a partial last line.
                if not line.endswith('\n'):
                    continue
                record = json.loads(line)
                if record.pop('begin', False):
                    begun[record['seq']] = record
                    continue
                begun.pop(record.get('seq'), None)
                records.append(record)
        for record in begun.values():
            records.append(dict(record, outcome='killed', t1=float('inf'),
                                msgs=record.get('msgs') or []))
    return records


def check(records, examples=5, dead_letters=None):
    """Check a history; return a report dict (see module docstring):
    counts of operations, faults and violations, a few ``examples`` of
    each violation, and ``all`` of them. ``dead_letters`` ({queue: its
    dead-letter queue}) tells where else a lost message may have been
    popped."""
    dead_letters = dead_letters or {}
    posted, handouts, gone = {}, collections.defaultdict(list), {}
    consumed, maybe_gone = set(), collections.defaultdict(list)
    operations, faults = collections.Counter(), collections.Counter()
    crashes, failed_pops = [], []
    claims = {r['claim']: r for r in records
              if r['op'] == 'claim' and r['outcome'] == 'ok'}
    for r in records:
        if r['op'] == 'fault':
            faults[r['kind']] += 1
            continue
        operations['{} {}'.format(r['op'], r['outcome'])] += 1
        if r['outcome'] == 'crash':
            crashes.append({k: r.get(k) for k in ('who', 'op', 'q', 't0',
                                                  'err')})
        if r['op'] == 'post':
            ids = r.get('ids') or [None] * len(r['msgs'])
            for m, mid in zip(r['msgs'], ids):
                posted[m['t']] = dict(m, id=mid, t0=r['t0'],
                                      acked=r['outcome'] == 'ok'
                                      and not r.get('unconfirmed'))
        elif r['op'] == 'pop' and r['outcome'] in ('error', 'crash',
                                                   'killed'):
            failed_pops.append(r)
        elif r['op'] in ('claim', 'pop') and r['outcome'] == 'ok':
            for m in r['msgs']:
                handouts[m['t']].append(dict(
                    r, tag=m['t'], id=m['id'], msgs=None))
                if r['op'] == 'pop':
                    consumed.add(m['t'])
                    if not r.get('unconfirmed'):
                        _earliest(gone, m['t'], r['t1'])
                    maybe_gone[m['t']].append(r['t0'])
        elif r['op'] == 'delete':
            if r['outcome'] == 'ok':
                consumed.add(r['tag'])
                if not (r.get('unconfirmed') or _may_have_been_dead_lettered(
                        r, claims, dead_letters)):
                    _earliest(gone, r['tag'], r['t1'])
            if r['outcome'] != 'refused':
                maybe_gone[r['tag']].append(r['t0'])

    violations = collections.defaultdict(list)
    if crashes:
        violations['not_a_storage_error'] = crashes
    exists = {t for t, m in posted.items() if m['acked']} | set(handouts)
    # A delete that failed may have run: its consumer had the message.
    for tag in sorted(exists - consumed - set(maybe_gone)):
        post = posted.get(tag)
        violations['lost'].append({
            'tag': tag, 'post': post, 'handouts': _brief(handouts[tag]),
            'failed_pops_since_post': sum(
                1 for r in failed_pops
                if post and r['t1'] >= post['t0'] and r['q'] in (
                    post['q'], dead_letters.get(post['q'])))})
    for tag, outs in handouts.items():
        _check_pairs(tag, outs, violations)
        for h in outs:
            if _after(gone, tag, h):
                violations['after_deletion'].append(
                    {'tag': tag, 'handout': _brief([h])[0],
                     'deleted_by': gone[tag]})
            post = posted.get(tag)
            if post and h['t1'] < post['t0'] + post['d'] - TOLERANCE_S:
                violations['early'].append(
                    {'tag': tag, 'post_sent': post['t0'],
                     'delay': post['d'], 'handout': _brief([h])[0]})
    _check_groups(posted, handouts, maybe_gone,
                  {v['tag'] for v in violations.get('lost', ())}, violations)
    return {
        'operations': dict(sorted(operations.items())),
        'operations_total': sum(operations.values()),
        'faults': dict(sorted(faults.items())),
        'messages': {'posted_acked': sum(m['acked']
                                         for m in posted.values()),
                     'posted_unknown': sum(not m['acked']
                                           for m in posted.values()),
                     'handed_out': len(handouts),
                     'consumed': len(consumed)},
        'violations': {kind: len(found)
                       for kind, found in sorted(violations.items())},
        'examples': {kind: found[:examples]
                     for kind, found in sorted(violations.items())},
        # Every violation found, for attributing them to faults.
        'all': dict(violations),
    }


def _earliest(table, tag, at):
    table[tag] = min(at, table.get(tag, at))


def _may_have_been_dead_lettered(delete, claims, dead_letters):
    """Could the message have left the queue for its dead-letter queue
    before this delete ran, its claim having ended (a claim executes at
    its t0 at the earliest, so it ends at t0 + ttl at the earliest)?"""
    claim = claims.get(delete.get('claim'))
    return (delete['q'] in dead_letters and claim is not None
            and delete['t1'] + TOLERANCE_S >= claim['t0'] + claim['ttl'])


def _after(gone, tag, handout):
    """A hand-out that began after the message was certainly deleted
    (by a delete, or by a pop other than this hand-out)."""
    return tag in gone and handout['t0'] > gone[tag] + TOLERANCE_S


def _may_precede(a, b):
    """Could hand-out ``a`` have executed, then ended, before ``b``? One
    whose writes were not confirmed may have been lost with them."""
    if a.get('unconfirmed'):
        return True
    if a['op'] == 'pop':
        return False
    return b['t1'] + TOLERANCE_S >= a['t0'] + a['ttl']


def _check_pairs(tag, outs, violations):
    for i, a in enumerate(outs):
        for b in outs[i + 1:]:
            if not _may_precede(a, b) and not _may_precede(b, a):
                violations['two_live_claims'].append(
                    {'tag': tag, 'handouts': _brief([a, b])})


def _check_groups(posted, handouts, maybe_gone, lost, violations):
    """Within a group (posting order = ``n``), a member is handed out only
    after every earlier member that exists began to be deleted. A lost
    member is reported once, as lost."""
    groups = collections.defaultdict(list)
    for tag, m in posted.items():
        if m.get('g') is not None and (m['acked'] or tag in handouts):
            groups[(m['q'], m['g'])].append((m['n'], tag))
    for members in groups.values():
        members.sort()
        latest_gone, blocker = float('-inf'), None
        for n, tag in members:
            for h in handouts.get(tag, ()):
                if h['t1'] + TOLERANCE_S < latest_gone:
                    violations['group_order'].append(
                        {'tag': tag, 'handout': _brief([h])[0],
                         'earlier': blocker})
            if tag in lost:
                continue
            began = min(maybe_gone.get(tag, [float('inf')]))
            if began > latest_gone:
                latest_gone, blocker = began, tag


def _brief(outs):
    return [{k: h.get(k) for k in ('who', 'op', 'q', 'claim', 'ttl', 't0',
                                   't1', 'id')} for h in outs]
