"""Sticky groups on Swift (docs/usage.md, "Sticky consumers"; layout:
names.py, the upper-case prefixes but ``R/``).

On a queue with ``_message_group_sticky``, a group whose head a client
claimed or popped is pinned to it (``P/<gk>``, and ``Q/<ck>/<gk>`` so an
idle sweep finds the client's groups). While that client is active
(``C/<ck>``: a claim, renewal or delete within the sticky time), the
group's head is filed under ``A/<ck>/`` instead of ``a/``. A claim by C
lists ``a/`` and ``A/<C>/`` only, so groups pinned to other clients cost
it nothing, whatever their number.

Swift has no conditional delete and no transaction: every step here
writes before it deletes (a head is filed under ``a/`` before its ``A/``
entry goes), so a race can only cost a group its stickiness, never a
message; the message locks (``l/``) still decide every hand-out.
"""

from zaqar_delay.drivers.swift import names

# Groups freed (or stray pinned heads filed again) per sweep, so one
# claim, stats call or gc step never does work that grows with the pins.
SWEEP_BATCH = 100


def _params(found, key='content_type'):
    return names.ct_params(found.get(key)) if found is not None else None


def activity(qs, ck, fresh=False):
    """Client ``ck``'s activity ({'a', 'u', 'st', 'id'}) or None, read once
    per operation unless ``fresh``."""
    if fresh or ck not in qs.activity:
        found = _params(qs.store.head(qs.c, names.activity_obj(ck)),
                        'content-type')
        qs.activity[ck] = found and dict(
            found, a=int(found['a']), u=int(found['u']),
            st=int(found['st']))
    return qs.activity[ck]


def pin_of(qs, gk):
    """Group ``gk``'s pin ({'cl', 'id', 't'}) or None, read once per
    operation."""
    if gk not in qs.pins:
        found = _params(qs.store.head(qs.c, names.pin_obj(gk)),
                        'content-type')
        qs.pins[gk] = found and dict(found, t=int(found['t']))
    return qs.pins[gk]


def holder(qs, gk, now):
    """The client key a head of ``gk`` is filed for, or None (no pin, or
    its client is idle: the head is free for whoever claims)."""
    pin = pin_of(qs, gk)
    if pin is None:
        return None
    act = activity(qs, pin['cl'])
    return pin['cl'] if act is not None and act['u'] > now else None


def _write_activity(qs, ck, client, at, until, sticky_ms):
    act = {'a': at, 'u': until, 'st': sticky_ms, 'id': client}
    # The end index first: a C/ without its K/ entry would never be swept.
    # A sticky client's activity is often the first write to its queue
    # (claims polling it while empty): it may make the container.
    qs.store.put(qs.c, names.activity_end_obj(until, ck), recreate=True)
    qs.store.put(qs.c, names.activity_obj(ck),
                 content_type=names.content_type(**act), recreate=True)
    qs.activity[ck] = act


def activate(qs, client, sticky_s, now):
    """A claim or pop by ``client``: active for ``sticky_s`` from now."""
    sticky_ms = sticky_s * 1000
    _write_activity(qs, names.client_key(client), client, now,
                    now + sticky_ms, sticky_ms)


def touch(qs, client, now):
    """A renewal or delete by ``client``: still active, if it is tracked
    here (one HEAD otherwise)."""
    if client is None:
        return
    ck = names.client_key(client)
    act = activity(qs, ck, fresh=True)
    if act is not None:
        _write_activity(qs, ck, client, now,
                        max(act['u'], now + act['st']), act['st'])


def pin(qs, client, gks, now):
    """Pin groups ``gks`` (heads just handed out to ``client``)."""
    ck = names.client_key(client)
    todo = [gk for gk in dict.fromkeys(gks)
            if (qs.pins.get(gk) or {}).get('cl') != ck]

    def one(gk):
        # Q/ before P/: a pin the sweep cannot find would never go.
        qs.store.put(qs.c, names.held_obj(ck, gk))
        qs.store.put(qs.c, names.pin_obj(gk), content_type=names.content_type(
            cl=ck, id=client, t=now))
        qs.pins[gk] = {'cl': ck, 'id': client, 't': now}

    qs.store.parallel(one, todo)


def _drop(qs, pinned):
    """Delete pins ((gk, ck) pairs), P/ before Q/: a Q/ entry left behind
    costs a sweep one HEAD, a P/ left without its Q/ would never go."""
    qs.store.delete_many(qs.c, [names.pin_obj(gk) for gk, _ in pinned])
    qs.store.delete_many(qs.c, [names.held_obj(ck, gk) for gk, ck in pinned])
    for gk, _ in pinned:
        qs.pins[gk] = None


def unpin(qs, gk):
    """Free group ``gk`` (operator); the client id it was pinned to, or
    None. Its head, if filed for that client, is filed under ``a/``."""
    found = pin_of(qs, gk)
    if found is None:
        return None
    # The head first: an unpin cut short after dropping the pin would
    # find no pin when retried, and leave the head filed for the client.
    refile_head(qs, found['cl'], gk)
    _drop(qs, [(gk, found['cl'])])
    return found['id']


def unpin_groups(qs, gks):
    """Zaqar's purge popped the heads of ``gks``: they keep no pin, so
    their next heads are filed free."""
    gks = list(dict.fromkeys(gk for gk in gks if gk is not None))
    found = qs.store.parallel(lambda gk: pin_of(qs, gk), gks)
    _drop(qs, [(gk, pin['cl']) for gk, pin in zip(gks, found) if pin])


def refile(qs, entries):
    """File pinned heads (``A/`` listing entries) under ``a/``: the new
    entry before the old one goes, as every move between indexes."""
    def one(entry):
        params = names.ct_params(entry.get('content_type'))
        # x: a head filed for its expiry stays never handed out.
        qs.store.put(qs.c, names.avail_obj(*names.parse_entry(entry['name'])),
                     content_type=names.content_type(g=params.get('g'),
                                                     u=params.get('u'),
                                                     x=params.get('x')))

    qs.store.parallel(one, entries)
    qs.store.delete_many(qs.c, [entry['name'] for entry in entries])


def refile_head(qs, ck, gk):
    """File group ``gk``'s head under ``a/`` if it is filed for ``ck``."""
    first = qs.store.listing(qs.c, names.group_prefix(gk), limit=1)
    if not first:
        return
    _, pos, message_id = names.parse_group_entry(first[0]['name'])
    refile(qs, qs.store.listing(
        qs.c, names.pinned_prefix(ck, pos, message_id)))


def sweep(qs, now, idle_only=True):
    """Free up to SWEEP_BATCH groups of one client whose activity ended
    (of any client when ``idle_only`` is False: the queue is no longer
    sticky), and delete stale ``K/`` entries met on the way. A client
    left with no pin and no pinned head is forgotten."""
    entries = qs.store.listing(
        qs.c, 'K/', limit=SWEEP_BATCH,
        end_marker='K/' + names.ms(now + 1) if idle_only else None)
    if not entries:
        return
    ends = [names.parse_activity_end(e['name']) for e in entries]
    cks = list(dict.fromkeys(ck for _, ck in ends))
    acts = dict(zip(cks, qs.store.parallel(
        lambda ck: activity(qs, ck, fresh=True), cks)))
    stale, chosen = [], None
    for entry, (_, ck) in zip(entries, ends):
        act = acts[ck]
        # A client active again wrote a later K/ entry: this one is old.
        if act is None or (idle_only and act['u'] > now):
            stale.append(entry['name'])
        elif chosen is None:
            chosen = ck
    qs.store.delete_many(qs.c, stale)
    if chosen is not None:
        _free(qs, chosen, acts[chosen], [
            e['name'] for e, (_, ck) in zip(entries, ends) if ck == chosen])


def _free(qs, ck, act, ends):
    held = qs.store.listing(qs.c, names.held_prefix(ck), limit=SWEEP_BATCH)
    if held:
        gks = [e['name'][len(names.held_prefix(ck)):] for e in held]
        qs.pins.clear()
        found = qs.store.parallel(lambda gk: pin_of(qs, gk), gks)
        # A pin made after the activity read (t > a) survives the sweep.
        freed = [gk for gk, p in zip(gks, found)
                 if p and p['cl'] == ck and p['t'] <= act['a']]
        others = [gk for gk, p in zip(gks, found) if not p or p['cl'] != ck]
        qs.store.delete_many(qs.c, [names.pin_obj(gk) for gk in freed])
        qs.store.delete_many(qs.c, [names.held_obj(ck, gk)
                                    for gk in freed + others])
        for gk in freed:
            qs.pins[gk] = None
        qs.store.parallel(lambda gk: refile_head(qs, ck, gk), freed)
        return
    # Heads filed for it after their pin went (a filing racing a sweep).
    strays = qs.store.listing(qs.c, names.pinned_prefix(ck),
                              limit=SWEEP_BATCH)
    if strays:
        refile(qs, strays)
        return
    again = activity(qs, ck, fresh=True)
    if again is not None and again['a'] == act['a']:
        qs.store.delete_many(qs.c, [names.activity_obj(ck)] + ends)
        qs.activity[ck] = None


def claim_prefixes(policy):
    """The indexes a claim or pop lists (a/ first), and whether they are
    merged by position: its client's pinned heads too on a sticky queue,
    every client's for Zaqar's purge (no client: it takes every group)."""
    if not policy.sticky:
        return ['a/'], True
    if policy.client is None:
        return ['a/', 'A/'], False
    return ['a/', names.pinned_prefix(names.client_key(policy.client))], True


def before_claim(qs, policy, now):
    """A claim or pop's sticky step, before it settles and reads: its
    client becomes active and one idle client's groups are freed. On a
    grouped queue that is not sticky (any more), pins left from when it
    was are freed, a batch per claim, and heads are filed free."""
    qs.sticky = bool(policy.sticky)
    if policy.sticky:
        steps = [lambda: sweep(qs, now)]
        if policy.client is not None:
            steps.append(lambda: activate(qs, policy.client, policy.sticky,
                                          now))
        qs.store.parallel(lambda step: step(), steps)
    elif policy.group_key:
        sweep(qs, now, idle_only=False)


def after_claim(qs, policy, gks, now):
    """Heads of ``gks`` were handed out: pinned to the claim's client, or
    (Zaqar's purge on a sticky queue) freed."""
    gks = [gk for gk in gks if gk is not None]
    if not policy.sticky or not gks:
        return
    if policy.client is None:
        unpin_groups(qs, gks)
    else:
        pin(qs, policy.client, gks, now)


def clients_of(qs, pinned, activities, now):
    """{group key: client id} of the groups pinned to a live client, from
    the ``P/`` and ``C/`` listings."""
    live = {e['name'][2:] for e in activities
            if int(names.ct_params(e.get('content_type')).get('u', 0)) > now}
    out = {}
    for entry in pinned:
        params = names.ct_params(entry.get('content_type'))
        if params.get('cl') in live:
            out[entry['name'][2:]] = params.get('id')
    return out


def gc_pass(qs, now):
    """gc's deep pass: one sweep, then heads filed for a client that is
    forgotten (a filing that raced the sweep) are filed under ``a/``.
    Returns the ``A/`` entries left, which count as filed heads."""
    sweep(qs, now)
    entries, known = qs.store.parallel(
        lambda prefix: qs.store.listing_all(qs.c, prefix), ['A/', 'C/'])
    known = {e['name'][2:] for e in known}
    strays = [e for e in entries
              if e['name'].split('/')[1] not in known][:SWEEP_BATCH]
    refile(qs, strays)
    return [e for e in entries if e not in strays]
