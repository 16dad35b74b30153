"""Message groups on Swift: the member index and the head rule.

Layout (names.py): every member of group G has ``g/G/<position>/<id>``,
so listing ``g/G/`` gives the group in order and its first entry is the
head. Only a head is ever filed under ``a/`` or ``d/``: claims read those
alone, so blocked members cost a claim nothing.

The rules, each a step that is idempotent or a conditional create:

* **join** (post): store the message, then its ``g/`` entry, then file it
  if it is the first entry (the group was empty).
* **advance** (whoever removes a member: delete, expiry, pop, dead-letter,
  purge, move): file the group's first entry if it was never claimed.
  Filing attempt 1 of a message has one fixed name, so two nodes filing
  the same head write the same object, and filing an attempt that a
  claimer has already won leaves an entry that the next claimer drops
  (its lock exists).
* **claim check**: a claimer takes a grouped entry only while it is the
  first of ``g/G/``, and at most one entry per group per claim or pop.
* **repair** (gc): re-derive each group's head from its member listing,
  after a node died between removing a head and filing the next one.
  A message stored without its ``g/`` entry was never in its group (a
  draft, drafts.py): gc removes it rather than let it join late.

Swift takes no locks, so two posts to one group that overlap in flight can
land out of position order; see docs/swift.md for what that permits.
"""

from zaqar_delay.drivers.swift import names


def entry_type(message):
    # Its expiry too: a head that expires before it is due is filed for
    # its expiry (state.QueueState.make_available).
    return names.content_type(d=message.due, g=message.group,
                              e=message.expires)


def join(qs, messages, now):
    """Add stored messages (one post, in order) to their groups, every
    entry first, then file each group's first one if it is the head."""
    qs.store.parallel(lambda m: qs.store.put(
        qs.c, names.group_obj(m.gk, m.pos, m.id), content_type=entry_type(m)),
        messages)
    firsts = {}
    for message in messages:
        firsts.setdefault(message.gk, message.id)
    qs.store.parallel(lambda item: advance(qs, item[0], now, only=item[1]),
                      list(firsts.items()))


def advance(qs, gk, now, only=None):
    """File the first member of group ``gk`` unless it was ever claimed
    (then its claim's end files it again), or unless the member after it is
    in flight (two posts crossed: that one was handed out first, so this one
    waits for it). With ``only``, file nothing but that message."""
    entries = qs.store.listing(qs.c, names.group_prefix(gk), limit=2)
    if not entries:
        return
    _, pos, message_id = names.parse_group_entry(entries[0]['name'])
    if only is not None and message_id != only:
        return
    checks = [] if only is not None else [('first', message_id)]
    if len(entries) > 1:
        checks.append(('next', names.parse_group_entry(
            entries[1]['name'])[2]))
    cache = {}
    for (which, _), (attempts, busy) in zip(checks, qs.store.parallel(
            lambda check: qs.busy(check[1], now, cache), checks)):
        if (which == 'first' and attempts) or (which == 'next' and busy):
            return
    params = names.ct_params(entries[0].get('content_type'))
    # Entries written before the expiry was kept in them have none.
    expires = int(params['e']) if 'e' in params else None
    qs.make_available(pos, message_id, 1, int(params.get('d', 0)), now, gk,
                      expires=expires)


def is_head(qs, gk, pos, message_id):
    """True if the message is the first entry of its group."""
    first = qs.store.listing(qs.c, names.group_prefix(gk), limit=1)
    return bool(first) and names.parse_group_entry(first[0]['name']) == (
        gk, pos, message_id)


def repair(qs, now, positions, latest, entries, filed_entries):
    """gc: re-derive every group's head from its member listing.

    ``positions`` maps each message id to its ``p/`` fields (live or not),
    ``latest`` each locked message id to its latest attempt; ``entries``
    is the ``g/`` listing, ``filed_entries`` the ``a/`` and ``d/`` ones.
    (A member stored without its ``g/`` entry is a draft: drafts.py
    removes it, it never joins late behind members handed out since.)
    Returns the groups repaired.
    """
    filed = {names.parse_entry(e['name'])[-2] for e in filed_entries}
    heads, suspects = {}, []
    for entry in entries:
        gk, pos, message_id = names.parse_group_entry(entry['name'])
        if message_id not in positions:
            suspects.append((message_id, pos, 0, gk))
        else:
            heads.setdefault(gk, message_id)
    # A post writes p/ before g/, so an entry whose p/ is still missing
    # now (not only in the older listing) belongs to a removed message.
    ghosts = [s for s, found in zip(suspects, qs.store.parallel(
        lambda s: qs.store.head(qs.c, names.position_obj(s[1])), suspects))
        if found is None]
    if ghosts:
        # A removal died midway (or its bulk delete partly failed).
        qs.remove(ghosts, now)
    stuck = [gk for gk, head in heads.items()
             if head not in filed and head not in latest]
    qs.store.parallel(lambda gk: advance(qs, gk, now), stuck)
    return len(ghosts) + len(stuck)
