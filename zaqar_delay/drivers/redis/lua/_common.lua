-- Prepended to every queue script (see scripts.py); the key layout is in
-- keys.py.
--
-- KEYS[1] is Q:msgs, there to route the call to the queue's node (a
-- Redis Cluster); every key below is Q .. ':' .. its name (keys.py,
-- QUEUE_KEY_SUFFIXES), all in the queue's hash tag, built here rather
-- than sent: 15 key names per call cost the client more than the script.
--   msgs    zset id -> position      seq     string
--   avail   zset id -> position      claims  zset claim -> exp
--   delayed zset id -> due (d)       outbox  zset id -> pos
--   claimed zset id -> claim expiry  groups  zset group -> 0
--   expiry  zset id -> expires       deleted zset id -> when
--   free    zset id -> position (live messages not under a claim)
--   removed string: messages retention removed so far
--   floor   string: position below which free messages are beyond
--           retention's length for good
--   readfloor string: last position read by every required persistent
--           consumer; free messages at or before it are gone
--   consumers zset consume_id -> registration time (ms)
--   carried zset id -> when it may be forgotten (ids a move carried in)
-- ARGV[1] queue key prefix Q (message hashes Q:m:<id>, claims Q:c:<id>,
--         claimed ids Q:cm:<id>, group members Q:g:<group>, claimed group
--         heads Q:gflight, group moves Q:moving and Q:movetargets)
-- ARGV[2] "now" in epoch ms for tests, or "" to use the Redis clock
-- Times are epoch milliseconds; ttl and delays arrive in seconds.
--
-- Only group heads (the first live member of a group) and ungrouped
-- messages are ever filed under avail or delayed; the rest of a group waits
-- in Q:g:<group> alone, so claims never see blocked messages.
--
-- Bounded work: no script settles, purges or scans more than a fixed
-- number of messages per call (BATCH, or less where the caller says), so
-- none holds Redis for long whatever the queue holds; what is left waits
-- for the next call or gc. Reads stay exact meanwhile: read() refuses
-- expired messages, and only due messages are ever filed under avail.

-- ARGV[3], taken out here so that each script's own arguments start at
-- ARGV[3]: '' or 'g' .. the metadata generation the caller's cached
-- policy was read at (metadata.py); when Q:metagen moved since, the
-- script answers ZDSTALE before it reads or writes anything else.
local ASSUMED_GENERATION = table.remove(ARGV, 3)
if ASSUMED_GENERATION ~= '' and ASSUMED_GENERATION ~=
    'g' .. (redis.call('GET', ARGV[1] .. ':metagen') or '') then
  return redis.error_reply('ZDSTALE queue metadata changed')
end

local Q = ARGV[1]
local MSGS, AVAIL, DELAYED = KEYS[1], Q .. ':avail', Q .. ':delayed'
local CLAIMED, EXPIRY, SEQ = Q .. ':claimed', Q .. ':expiry', Q .. ':seq'
local CLAIMS, OUTBOX, GROUPS = Q .. ':claims', Q .. ':outbox', Q .. ':groups'
local DELETED, FREE, REMOVED = Q .. ':deleted', Q .. ':free', Q .. ':removed'
local FLOOR, READFLOOR = Q .. ':floor', Q .. ':readfloor'
-- Ids zaqar-delay-migrate carried in, scored by when they may be
-- forgotten (the message's expiry plus CARRIED_MARGIN_MS): a move run
-- again skips them, also once their consumer deleted them (post.lua).
local CARRIED = Q .. ':carried'
-- Ids that left for another queue (dead letters, moved groups) lately,
-- scored by when: a retried post skips them (post.lua), outbox copies
-- coming back do not. Forgotten with DELETED (forget_buried).
local MOVED_OUT = Q .. ':movedout'
local CONSUMERS = Q .. ':consumers'
-- Grouped ids under a claim, scored by claim expiry: the groups in flight
-- are counted from it without walking every claimed id.
local GFLIGHT = Q .. ':gflight'
-- Groups being moved (group -> last step, ms) and where to (group ->
-- target queue); a moving group's next member is never filed for claims.
local MOVING, MOVE_TARGETS = Q .. ':moving', Q .. ':movetargets'
-- group -> the ids (MessagePack) the move's last step took: no step takes
-- the next batch while any of them is still in the outbox.
local MOVE_BATCHES = Q .. ':movebatch'
-- The position after which gc's next look at the outbox starts (gc.lua).
local OUTBOX_SCAN = Q .. ':outboxscan'

-- Messages settled, purged or scanned per call at most (see above).
local BATCH = 100
-- How long past its message's expiry a carried id is remembered (CARRIED).
local CARRIED_MARGIN_MS = 3600 * 1000

local function clock(override)
  if override ~= '' then return tonumber(override) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local NOW = clock(ARGV[2])

local function mkey(id) return Q .. ':m:' .. id end
local function ckey(cid) return Q .. ':c:' .. cid end
local function cmkey(cid) return Q .. ':cm:' .. cid end
local function gkey(group) return Q .. ':g:' .. group end

local function live_claim_of(c, ce)
  if c and c ~= '' and tonumber(ce) > NOW then return c end
  return ''
end

-- A member of delayed: its position (16 digits) before its id, so that
-- messages due in the same millisecond (one post) sort, and are promoted,
-- in position order.
local function delayed_member(id, pos)
  return string.format('%016d:', pos) .. id
end

-- Sticky groups (zaqar_delay/sticky.py; keys.py lists the keys): a group
-- pinned to a client that is still active has its claimable head filed
-- under that client's own index (PINNED_AVAIL .. client) instead of avail,
-- so claims by other clients never see it and pay nothing for it.
local PINS, ACTIVE, STICKY_MS = Q .. ':pin', Q .. ':pseen', Q .. ':sticky'
local function pinned_avail(client) return Q .. ':pa:' .. client end
local function pinned_groups(client) return Q .. ':pg:' .. client end

-- Unpin a group; its claimable head (if any) goes back under avail.
local function unpin(group, client)
  redis.call('HDEL', PINS, group)
  redis.call('SREM', pinned_groups(client), group)
  local head = redis.call('ZRANGE', gkey(group), 0, 0, 'WITHSCORES')
  if head[1] and redis.call('ZREM', pinned_avail(client), head[1]) == 1 then
    redis.call('ZADD', AVAIL, head[2], head[1])
  end
end

-- The live client a group is pinned to, or nil. A pin whose client went
-- idle (or left on a queue no longer sticky) is dropped when met.
local function pinned_to(group)
  if not group or group == '' then return nil end
  local client = redis.call('HGET', PINS, group)
  if not client then return nil end
  local until_ms = redis.call('ZSCORE', ACTIVE, client)
  if until_ms and tonumber(until_ms) > NOW
      and redis.call('EXISTS', STICKY_MS) == 1 then
    return client
  end
  unpin(group, client)
  return nil
end

-- File a claimable message: a pinned group's head under its client.
local function file_claimable(id, pos, group)
  local client = pinned_to(group)
  redis.call('ZADD', client and pinned_avail(client) or AVAIL, pos, id)
end

-- Pin a group to the client that was just handed its head.
local function pin(group, client)
  redis.call('HSET', PINS, group, client)
  redis.call('SADD', pinned_groups(client), group)
end

-- A claim, renewal or delete by `client` keeps it active for the queue's
-- sticky time (STICKY_MS, which the last claim stored). Only clients that
-- claimed on the queue are tracked.
local function touch(client)
  if client == '' or not redis.call('ZSCORE', ACTIVE, client) then return end
  local sticky_ms = redis.call('GET', STICKY_MS)
  if sticky_ms then
    redis.call('ZADD', ACTIVE, NOW + tonumber(sticky_ms), client)
  end
end

-- Free up to n groups of one client that went idle (all clients when the
-- queue is no longer sticky), handing their heads back to avail; a client
-- left with no group is forgotten. Bounded: a client with more groups is
-- finished by the next calls.
local function sweep_idle(n, sticky_on)
  local idle
  if sticky_on then
    idle = redis.call('ZRANGEBYSCORE', ACTIVE, '-inf', NOW, 'LIMIT', 0, 1)
  else
    idle = redis.call('ZRANGE', ACTIVE, 0, 0)
  end
  local client = idle[1]
  if not client then return false end
  -- First the groups whose heads wait in the client's own index: another
  -- client can take those at once. The rest, most often pins of groups
  -- that emptied since (a pin outlives its group), go at random.
  local waiting = redis.call('ZRANGE', pinned_avail(client), 0, n - 1,
                             'WITHSCORES')
  for i = 1, #waiting, 2 do
    local id = waiting[i]
    local group = redis.call('HGET', mkey(id), 'g')
    if group and redis.call('HGET', PINS, group) == client then
      unpin(group, client)
    else
      redis.call('ZREM', pinned_avail(client), id)
      if group then file_claimable(id, waiting[i + 1], group) end
    end
  end
  for _, group in ipairs(redis.call('SRANDMEMBER', pinned_groups(client),
                                    n - #waiting / 2)) do
    if redis.call('HGET', PINS, group) == client then
      unpin(group, client)
    else
      redis.call('SREM', pinned_groups(client), group)
    end
  end
  if redis.call('SCARD', pinned_groups(client)) == 0 then
    redis.call('ZREM', ACTIVE, client)
    redis.call('DEL', pinned_avail(client))
  end
  return true
end

-- A claim or pop by `client` on a queue whose sticky time is `sticky_ms`
-- (0: not sticky): records the client as active and frees a batch of
-- groups of idle clients. Returns the client's own index of pinned heads,
-- or nil when the queue is not sticky. No client on a sticky queue is
-- Zaqar's own purge (the controller refuses any other claim or pop
-- without one): it frees groups of any client, a few batches per call,
-- until avail holds `limit` heads, so that it pops every group; then a
-- second result is true when it stopped at that bound.
local function sticky_claim(client, sticky_ms, limit)
  if sticky_ms > 0 and client == '' then
    for _ = 1, 5 do
      if redis.call('ZCARD', AVAIL) >= limit
          or not sweep_idle(BATCH, false) then
        return nil, false
      end
    end
    return nil, true
  end
  local on = sticky_ms > 0
  if on then
    redis.call('SET', STICKY_MS, sticky_ms)
  elseif redis.call('EXISTS', STICKY_MS) == 1 then
    redis.call('DEL', STICKY_MS)
  end
  sweep_idle(BATCH, on)
  if not on then return nil end
  redis.call('ZADD', ACTIVE, NOW + sticky_ms, client)
  return pinned_avail(client)
end

-- File an unclaimed message under avail (due) or delayed (not yet due).
-- One `command` on `key` with every value of the flat list `args` (ZADD
-- with score, member, score, member...; ZREM with members), in chunks
-- that stay within Lua's limit on unpacked values; 4000 is even, so a
-- ZADD's pairs stay whole.
local function send_all(command, key, args)
  for first = 1, #args, 4000 do
    redis.call(command, key,
               unpack(args, first, math.min(first + 3999, #args)))
  end
end

-- A group's head that expires before it is due waits until its expiry
-- instead: never claimable, it is promoted expired, and the claim that
-- meets it drops it, so that its group goes on from then (SPEC §4), not
-- only once it would have been due (claim.lua puts back one it meets
-- live and not due). `expires` nil: not known.
local function place(id, due, pos, group, expires)
  local grouped = group and group ~= '' and expires
  if grouped and expires <= NOW then
    file_claimable(id, pos, group)
  elseif due > NOW then
    redis.call('ZADD', DELAYED, grouped and math.min(due, expires) or due,
               delayed_member(id, pos))
  else
    file_claimable(id, pos, group)
  end
end

-- File a group's first member, unless it is claimed; forget empty groups.
local function place_head(group)
  while true do
    local head = redis.call('ZRANGE', gkey(group), 0, 0, 'WITHSCORES')
    if #head == 0 then
      redis.call('ZREM', GROUPS, group)
      return
    end
    if redis.call('ZSCORE', MOVING, group) then return end
    local f = redis.call('HMGET', mkey(head[1]), 'd', 'c', 'ce', 'e')
    if f[1] then
      if live_claim_of(f[2], f[3]) == '' then
        place(head[1], tonumber(f[1]), tonumber(head[2]), group,
              tonumber(f[4]))
      end
      return
    end
    redis.call('ZREM', gkey(group), head[1])
  end
end

-- Take a message out of every index (and its group, unblocking the next
-- member when it was the head); its hash stays. `known`: its fields
-- {g, p} when the caller read them already.
-- The indexes a message may be in by its id (DELAYED: as filed by
-- earlier versions; now by delayed_member), whatever its group.
local MESSAGE_INDEXES = {MSGS, FREE, AVAIL, DELAYED, CLAIMED, EXPIRY}

local function detach(id, known)
  local f = known or redis.call('HMGET', mkey(id), 'g', 'p')
  local group = f[1]
  for _, index in ipairs(MESSAGE_INDEXES) do redis.call('ZREM', index, id) end
  if f[2] then redis.call('ZREM', DELAYED, delayed_member(id, f[2])) end
  if group then
    redis.call('ZREM', GFLIGHT, id)
    local client = redis.call('HGET', PINS, group)
    if client then redis.call('ZREM', pinned_avail(client), id) end
    local was_head = redis.call('ZRANGE', gkey(group), 0, 0)[1] == id
    redis.call('ZREM', gkey(group), id)
    if was_head then place_head(group) end
  end
end

local function drop(id, known)
  detach(id, known)
  redis.call('DEL', mkey(id))
end

-- drop() of several ids: the index removals of those in no group go out
-- together (one ZREM per index, not one per message: a mass expiry is
-- removed at a fraction of the cost); one in a group goes at once, as its
-- removal may place the group's next head. `known[i]`: {g, p} of ids[i]
-- when the caller read them.
local function drop_all(ids, known)
  local loose, members, hashes = {}, {}, {}
  for i, id in ipairs(ids) do
    local f = known and known[i] or redis.call('HMGET', mkey(id), 'g', 'p')
    if f[1] then
      drop(id, f)
    else
      loose[#loose + 1] = id
      if f[2] then members[#members + 1] = delayed_member(id, f[2]) end
      hashes[#hashes + 1] = mkey(id)
    end
  end
  for _, index in ipairs(MESSAGE_INDEXES) do
    send_all('ZREM', index, loose)
  end
  send_all('ZREM', DELAYED, members)
  for first = 1, #hashes, 4000 do
    redis.call('DEL', unpack(hashes, first, math.min(first + 3999, #hashes)))
  end
end

-- Remember that a consumer deleted `id`, so that a retried post or a
-- repeated outbox copy cannot store it again (post.lua skips buried ids).
local function bury(id)
  redis.call('ZADD', DELETED, NOW, id)
end

-- Remove at most `batch` members of zset `key` scored up to `last`;
-- how many it removed.
local function forget_until(key, last, batch)
  local old = redis.call('ZRANGEBYSCORE', key, '-inf', last,
                         'LIMIT', 0, batch)
  if #old > 0 then redis.call('ZREM', key, unpack(old)) end
  return #old
end

-- Forget at most `batch` ids deleted (or moved out) more than `memory_ms`
-- ago: bounded work per call. Deleting scripts call it with about what
-- they buried; gc repeats it until both sets are caught up (gc.lua), as
-- some burials (a stats call's removals, a group's purge) forget none.
-- Returns the larger of the two counts forgotten.
local function forget_buried(memory_ms, batch)
  local before = NOW - tonumber(memory_ms)
  return math.max(forget_until(MOVED_OUT, before, batch),
                  forget_until(DELETED, before, batch))
end

-- Forget at most `batch` carried ids whose messages expired, with a margin
-- for the source store's clock (the move would skip them there too).
local function forget_carried(batch)
  return forget_until(CARRIED, NOW, batch)
end

-- Claims that ended by expiry: redeliver up to n of their messages, after
-- the redelivery delay recorded when they were claimed.
local function release_expired_claims(n)
  local ids = redis.call('ZRANGEBYSCORE', CLAIMED, '-inf', NOW,
                         'LIMIT', 0, n)
  for _, id in ipairs(ids) do
    redis.call('ZREM', CLAIMED, id)
    redis.call('ZREM', GFLIGHT, id)
    local f = redis.call('HMGET', mkey(id), 'p', 'ce', 'rd', 'g', 'e')
    if f[1] then
      local due = tonumber(f[2]) + tonumber(f[3] or 0) * 1000
      redis.call('HSET', mkey(id), 'c', '', 'ce', 0, 'd', due)
      redis.call('ZADD', FREE, f[1], id)
      place(id, due, tonumber(f[1]), f[4], tonumber(f[5]))
    end
  end
  return #ids
end

-- Up to n delayed messages whose time has come become claimable, the
-- earliest due first (in position order among those due together); in
-- avail they take their place by position.
local function promote_due(n)
  local due = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', NOW,
                         'LIMIT', 0, n)
  for _, member in ipairs(due) do
    redis.call('ZREM', DELAYED, member)
    local pos, id = string.match(member, '^(%d+):(.+)$')
    if not pos then  -- a bare id, as filed by earlier versions
      id, pos = member, redis.call('HGET', mkey(member), 'p')
    end
    if pos then
      local group = redis.call('EXISTS', PINS) == 1
        and redis.call('HGET', mkey(id), 'g') or nil
      file_claimable(id, pos, group)
    end
  end
  return #due
end

-- Settle up to n expired claims and n due messages, and forget up to
-- BATCH ended claim ids (two commands however many: their hashes expire
-- by themselves). True when a bound was reached.
local function refresh(n)
  local released = release_expired_claims(n)
  local promoted = promote_due(n)
  local ended = redis.call('ZRANGEBYSCORE', CLAIMS, '-inf', NOW,
                           'LIMIT', 0, BATCH)
  if #ended > 0 then redis.call('ZREM', CLAIMS, unpack(ended)) end
  return released == n or promoted == n or #ended == BATCH
end

-- Drop up to n expired messages, the earliest expired first.
local function purge_expired(n)
  local ids = redis.call('ZRANGEBYSCORE', EXPIRY, '-inf', NOW, 'LIMIT', 0, n)
  drop_all(ids)
  return #ids
end

local MESSAGE_FIELDS = {'b', 't', 'cr', 'cc', 'c', 'ce', 'p', 'e', 'd', 'u',
                        'g', 'cs'}

-- The message `id` as a table, or nil (and the fields read) when it is
-- gone or expired.
local function read(id)
  local f = redis.call('HMGET', mkey(id), unpack(MESSAGE_FIELDS))
  if not f[1] or tonumber(f[8]) <= NOW then return nil, f end
  return {body = f[1], ttl = f[2], created = f[3], cc = f[4],
          claim = live_claim_of(f[5], f[6]), pos = f[7],
          expires = tonumber(f[8]), due = tonumber(f[9]), client = f[10],
          group = f[11] or '', checksum = f[12] or ''}
end

-- Wire format of one message: id, body, ttl, created, claim count,
-- live claim id ('' if none), position, group ('' if none), body checksum
-- ('' if none), due (ms).
local WIRE_FIELDS, WIRE_GROUP = 10, 8
local function emit(out, id, m)
  local n = #out
  out[n + 1] = id
  out[n + 2] = m.body
  out[n + 3] = m.ttl
  out[n + 4] = m.created
  out[n + 5] = m.cc
  out[n + 6] = m.claim
  out[n + 7] = m.pos
  out[n + 8] = m.group
  out[n + 9] = m.checksum
  out[n + 10] = m.due
end

-- Retention (zaqar_delay/retention.py). Scripts that apply it call
-- use_retention(time ms, length) first; 0 (or nothing) means no limit.
-- A message under a live claim is always kept; any other live message is
-- kept while created + time > NOW and while fewer than `length` free
-- messages (FREE: live, not under a claim, delayed ones included) are newer
-- than it. Both are decided from indexes: the length-th newest member of
-- FREE gives the position below which free messages are not kept, and,
-- since positions and created times grow together in a queue, the oldest
-- members of FREE are the ones past `time` (found by bisection, a fixed
-- number of steps per doubling of the queue).
-- The third setting is read-by-all (consumers_required): '' or nothing
-- when the queue has none, else the last position every required
-- persistent consumer acknowledged (-1: none yet, or too few consumers).
local RET_TIME, RET_LENGTH, RET_CUT = 0, 0, nil
local HIDE_BELOW, TIME_FROM, FLOOR_AT, EXPIRED_AT, READ_BELOW

local function use_retention(time_ms, length, cut)
  RET_TIME, RET_LENGTH = tonumber(time_ms) or 0, tonumber(length) or 0
  RET_CUT = nil
  if cut and cut ~= '' then RET_CUT = tonumber(cut) end
  HIDE_BELOW, TIME_FROM, FLOOR_AT, EXPIRED_AT = nil, nil, nil, nil
  READ_BELOW = nil
end

-- A position as a score bound (math.huge: past every position).
local function score(pos)
  if pos == math.huge then return '+inf' end
  return string.format('%d', pos)
end

local function retention_on()
  return RET_TIME > 0 or RET_LENGTH > 0 or RET_CUT ~= nil
end

-- The higher of two cutoffs, either of which may be false (none).
local function higher(a, b)
  if a and b then return math.max(a, b) end
  return a or b
end

-- Read-by-all is for good too: READFLOOR holds the highest cut applied so
-- far (never past the last position handed out, so that "every message
-- counts as read" leaves later posts alone), and a message at or before it
-- stays gone when a consumer later goes idle, is removed or registers.
-- Returns the position below which free messages are read by all, or
-- false.
local function read_below()
  if RET_CUT == nil then return false end
  if READ_BELOW == nil then
    local stored = tonumber(redis.call('GET', READFLOOR) or '')
    if RET_CUT >= 0 then
      local cut = math.min(RET_CUT, tonumber(redis.call('GET', SEQ) or 0))
      if cut > 0 and (not stored or cut > stored) then
        redis.call('SET', READFLOOR, score(cut))
        stored = cut
      end
    end
    READ_BELOW = stored and stored + 1 or false
  end
  return READ_BELOW
end

-- The position of the free message `length` - 1 + `extra` places from
-- the newest: free messages below it are beyond `length`. false when
-- FREE is not that long (length keeps every free message); math.huge
-- when even the newest is beyond it.
local function length_cutoff(extra)
  if RET_LENGTH == 0 then return false end
  local rank = RET_LENGTH - 1 + extra
  if rank < 0 then return math.huge end
  local at = redis.call('ZREVRANGE', FREE, rank, rank, 'WITHSCORES')
  return at[1] and tonumber(at[2]) or false
end

-- Beyond length is for good: a free message with `length` live free
-- messages newer than it is not kept, even if those leave later (claimed,
-- deleted, expired) before it was removed. FLOOR holds the highest such
-- position found so far; each script that applies length raises it to the
-- cutoff at NOW, counting expired messages not purged yet as if they were
-- not there (so it never rises past a message that is still kept).
-- Below it, free messages are gone for good, and may be removed.
local function length_floor()
  if RET_LENGTH == 0 then return false end
  if FLOOR_AT == nil then
    EXPIRED_AT = redis.call('ZCOUNT', EXPIRY, '-inf', NOW)
    local stored = tonumber(redis.call('GET', FLOOR) or '')
    local now = length_cutoff(EXPIRED_AT)
    if now and (not stored or now > stored) then
      redis.call('SET', FLOOR, score(now))
      stored = now
    end
    FLOOR_AT = stored or false
  end
  return FLOOR_AT
end

-- For reads: the floor, or higher where NOW is not settled. Messages whose
-- claim ended but was not settled yet are free too, and expired ones not
-- purged yet are still in FREE: each could be newer than a free message,
-- and counting them all as newer errs towards hiding, never towards
-- showing what is not kept. (Reading scripts settle and purge a batch
-- first, so there are rarely any.)
local function hide_below()
  if HIDE_BELOW == nil then
    local floor = length_floor()
    local unsettled = RET_LENGTH > 0
      and redis.call('ZCOUNT', CLAIMED, '-inf', NOW) or 0
    local now = floor
    if unsettled > 0 or (EXPIRED_AT or 0) > 0 then
      now = length_cutoff(-unsettled)
    end
    HIDE_BELOW = higher(higher(floor, now), read_below())
  end
  return HIDE_BELOW
end

-- Reads under retention first settle a batch of ended claims and expired
-- messages, so that both cutoffs are exact unless a backlog of them
-- exceeds that batch.
local function settle_for_retention()
  if retention_on() then
    refresh(BATCH)
    purge_expired(BATCH)
  end
end

-- For removal: the floors of length and read-by-all (see above).
local function remove_below()
  return higher(length_floor(), read_below())
end

local function too_old(created)
  return RET_TIME > 0 and tonumber(created) + RET_TIME <= NOW
end

-- (position of the oldest free message kept by time or false when every
-- one is, number of free messages before it).
local function time_cutoff()
  if TIME_FROM ~= nil then return TIME_FROM[1], TIME_FROM[2] end
  local function old(rank)
    local at = redis.call('ZRANGE', FREE, rank, rank, 'WITHSCORES')
    return too_old(redis.call('HGET', mkey(at[1]), 'cr') or 0), at[2]
  end
  local n = RET_TIME > 0 and redis.call('ZCARD', FREE) or 0
  if n == 0 or not old(0) then
    TIME_FROM = {false, 0}
  else
    local lo, hi = 0, n  -- old(lo); hi is n or not old(hi)
    while hi - lo > 1 do
      local mid = math.floor((lo + hi) / 2)
      if old(mid) then lo = mid else hi = mid end
    end
    local pos = math.huge
    if hi < n then pos = tonumber(select(2, old(hi))) end
    TIME_FROM = {pos, hi}
  end
  return TIME_FROM[1], TIME_FROM[2]
end

-- The position from which free messages may be visible, or false when
-- retention hides none: below it, every free message is not kept.
local function visible_from()
  if not retention_on() then return false end
  local by_length, by_time = hide_below(), time_cutoff()
  if by_length and by_time then return math.max(by_length, by_time) end
  return by_length or by_time
end

-- {id, position} of the first message after position `after` (nil: from
-- the start) and before `before` that is not in FREE (under a claim, or
-- one whose ended claim is not settled yet), or {} when there is none.
-- FREE is part of MSGS, so the messages held among the first k after
-- `after` are k minus the free ones up to the k-th: a bisection on that
-- count reads two indexes a fixed number of times per doubling of the
-- queue, however many free messages lie in between (a backlog that
-- retention hides, for a reader that wants claimed messages too).
local function next_held(after, before)
  local low = after and '(' .. score(after) or '-inf'
  local high = '(' .. score(before)
  local between = redis.call('ZCOUNT', MSGS, low, high)
  if between == redis.call('ZCOUNT', FREE, low, high) then return {} end
  local base = after and redis.call('ZCOUNT', MSGS, '-inf', score(after))
    or 0
  local function at(k)
    return redis.call('ZRANGE', MSGS, base + k, base + k, 'WITHSCORES')
  end
  local function held_up_to(k)
    local free = redis.call('ZCOUNT', FREE, low, at(k)[2])
    return k + 1 - free
  end
  local lo, hi = -1, between - 1  -- none held up to lo; one by hi
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    if held_up_to(mid) > 0 then hi = mid else lo = mid end
  end
  return at(hi)
end

-- Whether retention keeps message `m` (as read() returns it).
local function kept(m)
  if m.claim ~= '' or not retention_on() then return true end
  if too_old(m.created) then return false end
  local below = hide_below()
  return not below or tonumber(m.pos) >= below
end

-- Remove one message retention no longer keeps: like a deletion (its id
-- is remembered, so a retried post cannot bring it back), and counted.
local function retire(id)
  drop(id)
  bury(id)
  redis.call('INCR', REMOVED)
end

-- Remove up to n free messages that retention no longer keeps, oldest
-- first (expired ones met on the way are dropped, not counted: TTL, not
-- retention, removed them). Claimed messages are not in FREE, so none is
-- ever removed here; each removal is atomic with its count, so two
-- cleaners never remove or count one message twice. Returns (removed by
-- retention, true when n messages were looked at: there may be more).
-- The oldest are read in growing chunks (each one removed leaves the next
-- at the head), so a step that finds nothing to remove reads one message.
-- Remove free message `id` at position `pos` if it is gone: 'expired'
-- (dropped uncounted: TTL, not retention, removed it), 'retired' (below
-- `below`, remove_below(), or past `time`: counted), or nil (kept).
local function remove_if_gone(id, pos, below)
  local f = redis.call('HMGET', mkey(id), 'cr', 'e')
  if not f[2] or tonumber(f[2]) <= NOW then
    drop(id)
    return 'expired'
  end
  if (below and tonumber(pos) < below) or too_old(f[1]) then
    retire(id)
    return 'retired'
  end
  return nil
end

local function trim(n)
  if not retention_on() or n <= 0 then return 0, false end
  local below = remove_below()
  local removed, met, chunk = 0, 0, 1
  while met < n do
    local ids = redis.call('ZRANGE', FREE, 0, math.min(chunk, n - met) - 1,
                           'WITHSCORES')
    if #ids == 0 then break end
    for i = 1, #ids, 2 do
      local gone = remove_if_gone(ids[i], ids[i + 1], below)
      if not gone then return removed, false end
      if gone == 'retired' then removed = removed + 1 end
      met = met + 1
    end
    chunk = chunk * 2
  end
  return removed, met == n
end

-- Retire what retention no longer keeps at the front of `group`, by
-- trim's rules (free members only, below the floors or past `time`), at
-- most n; each retirement files the next member, as a deletion does.
-- Returns how many members it looked at.
local function clear_group_front(group, n)
  local below = remove_below()
  local ids = redis.call('ZRANGE', gkey(group), 0, n - 1, 'WITHSCORES')
  local met = 0
  for i = 1, #ids, 2 do
    if not redis.call('ZSCORE', FREE, ids[i])
        or not remove_if_gone(ids[i], ids[i + 1], below) then
      break
    end
    met = met + 1
  end
  return met
end

-- A claim that came back short on a grouped queue: claimable heads that
-- retention hides (below `from`, in avail or the client's own pinned
-- index) block their groups until trim or the cleanup reach them, and
-- trim takes the oldest free messages, not these. Retire up to n of
-- them and of the dropped members behind each, so that a consumer
-- taking one at a time behind a run of dropped members gets the first
-- kept one, not empty answers it would read as an empty queue. Returns
-- how many were looked at (0: nothing to do, no second pass needed).
local function clear_hidden_heads(from, n, mine)
  local met = 0
  for _, index in ipairs({AVAIL, mine}) do
    local heads = redis.call('ZRANGEBYSCORE', index, '-inf',
                             '(' .. score(from), 'WITHSCORES',
                             'LIMIT', 0, n - met)
    for i = 1, #heads, 2 do
      local group = redis.call('HGET', mkey(heads[i]), 'g')
      if group and group ~= '' then
        met = met + clear_group_front(group, n - met)
      elseif remove_if_gone(heads[i], heads[i + 1], remove_below()) then
        met = met + 1
      end
      if met >= n then return met end
    end
  end
  return met
end

-- Keep a claimed message alive until `keep_until` (ms); like Zaqar's
-- drivers, its visible ttl grows to the claim's ttl + grace when that is
-- longer than its own.
-- keep_alive's changes, for a caller that sends them with its own: the
-- hash fields are appended to `fields`; returns the new expiry for the
-- EXPIRY index, or nil when the message already lives long enough.
local function kept_alive(m, keep_until, claim_lifetime, fields)
  if m.expires >= keep_until then return nil end
  fields[#fields + 1], fields[#fields + 2] = 'e', keep_until
  if tonumber(m.ttl) < claim_lifetime then
    fields[#fields + 1], fields[#fields + 2] = 't', claim_lifetime
    m.ttl = claim_lifetime
  end
  m.expires = keep_until
  return keep_until
end

local function keep_alive(id, m, keep_until, claim_lifetime)
  local fields = {}
  local expires = kept_alive(m, keep_until, claim_lifetime, fields)
  if not expires then return end
  redis.call('HSET', mkey(id), unpack(fields))
  redis.call('ZADD', EXPIRY, expires, id)
end

-- The oldest (sort 1) or newest (-1) live message that retention keeps,
-- claimed or not; only due ones when due_only. At most BATCH ids are read:
-- past them (a crowd of expired messages not yet purged, of delayed ones,
-- or of ones retention no longer keeps), the answer comes from an index
-- instead, a live message near that end: the first or last claimable one
-- when due_only, else the one that expires soonest (oldest) or last
-- (newest), or with retention the oldest free one it may keep.
local function first_live(sort, due_only)
  local range = sort == 1 and 'ZRANGE' or 'ZREVRANGE'
  local start, step = 0, 50
  while start < BATCH do
    local ids = redis.call(range, MSGS, start, start + step - 1)
    if #ids == 0 then return nil end
    for _, id in ipairs(ids) do
      local m = read(id)
      if m and (m.due <= NOW or not due_only) and kept(m) then
        return id, m
      end
    end
    start = start + step
  end
  local near
  local from = sort == 1 and visible_from()
  if from then
    near = redis.call('ZRANGEBYSCORE', due_only and AVAIL or FREE,
                      score(from), '+inf', 'LIMIT', 0, 1)
  elseif due_only then
    near = redis.call(range, AVAIL, 0, 0)
  elseif sort == 1 then
    near = redis.call('ZRANGEBYSCORE', EXPIRY, '(' .. NOW, '+inf',
                      'LIMIT', 0, 1)
  else
    near = redis.call('ZREVRANGE', EXPIRY, 0, 0)
  end
  if near[1] then
    local m = read(near[1])
    if m and kept(m) then return near[1], m end
  end
  return nil
end

-- An operator step's result, kept for the retry span under
-- Q:<kind>:<token> so that a retry of the step (its reply lost) answers
-- what the step did instead of doing the next thing: nil when nothing is
-- kept (or the step has no token).
local function kept_result(kind, token)
  if not token or token == '' then return nil end
  local kept = redis.call('GET', Q .. ':' .. kind .. ':' .. token)
  return kept and cmsgpack.unpack(kept)
end

-- Keep `result` as kept_result finds it, for `span` ms; returns it.
local function keep_result(kind, token, span, result)
  if token and token ~= '' then
    redis.call('SET', Q .. ':' .. kind .. ':' .. token,
               cmsgpack.pack(result), 'PX', span)
  end
  return result
end

-- Move a detached message to the outbox, bound for queue `to` with ttl
-- `ttl` and delay `delay` (seconds); the caller copies it there.
local function to_outbox(id, pos, to, ttl, delay)
  detach(id)
  redis.call('HSET', mkey(id), 'to', to, 'tt', ttl, 'td', delay, 'ob', NOW)
  redis.call('ZADD', OUTBOX, pos, id)
  redis.call('ZADD', MOVED_OUT, NOW, id)
end

-- Persistent consumers (zaqar_delay/consumers.py): Q:cons:<consume_id> is a
-- hash (c cursor, h last position handed, '' for none; l lost; a last
-- active, r registered, ms), listed in CONSUMERS. A consumer lives as long
-- as its subscription (cursor:<consume_id>, see subscriptions.py): that
-- expires by itself, so its state is judged by it, and state whose
-- subscription is gone is dropped. A create registers the consumer before
-- it stores the subscription: a consumer registered less than
-- CONSUMER_GRACE ago may still be waiting for it and is only ignored.
local CONSUMER_GRACE = 60 * 1000
local function conkey(consume_id) return Q .. ':cons:' .. consume_id end

local function subscribed(consume_id)
  local sid = redis.call('HGET', Q .. ':subscribers', 'cursor:' .. consume_id)
  return sid and redis.call('EXISTS', Q .. ':s:' .. sid) == 1
end

-- When the consumer's subscription ends (ms) on Redis' clock, as its hash
-- expires (the expiry stored in it was computed on an API node's clock);
-- nil when it has none. A hash without a ttl falls back to that expiry.
local function subscription_ends(consume_id)
  local sid = redis.call('HGET', Q .. ':subscribers', 'cursor:' .. consume_id)
  if not sid then return nil end
  local key = Q .. ':s:' .. sid
  local left = redis.call('PTTL', key)
  if left >= 0 then return NOW + left end
  if left == -2 then return nil end
  local expires = redis.call('HGET', key, 'e')
  return expires and tonumber(expires) * 1000
end

-- Read-by-all needs the live consumers' count and lowest cursor on every
-- operation of a queue with consumers_required, so neither may cost a
-- walk over the consumers (a queue may have thousands: Zaqar does not
-- bound subscriptions). Three indexes keep them, updated as consumers
-- change (readers.lua reads them):
-- CONSUMER_SUBS   consume_id -> its subscription's expiry (ms), for every
--                 consumer whose subscription was stored
-- CONSUMER_PINS   consume_id -> cursor (-1 for none), and
-- CONSUMER_SEEN   consume_id -> last active (ms), both for the subscribed
--                 consumers that may still pin: idle ones leave them when
--                 readers.lua meets them, and come back with their next
--                 page (consumer_update.lua).
-- INDEXED says whether consumers registered before these indexes were
-- filed (readers.lua); it goes with the last consumer.
local CONSUMER_SUBS = Q .. ':csubs'
local CONSUMER_PINS, CONSUMER_SEEN = Q .. ':cpins', Q .. ':cseen'
local INDEXED = Q .. ':cindexed'

local function unindex_consumer(consume_id)
  redis.call('ZREM', CONSUMERS, consume_id)
  redis.call('ZREM', CONSUMER_SUBS, consume_id)
  redis.call('ZREM', CONSUMER_PINS, consume_id)
  redis.call('ZREM', CONSUMER_SEEN, consume_id)
  if redis.call('EXISTS', CONSUMERS) == 0 then redis.call('DEL', INDEXED) end
end

-- File a subscribed consumer as pinning, from its state; false when it
-- has no state.
local function pin_consumer(consume_id)
  local f = redis.call('HMGET', conkey(consume_id), 'c', 'a')
  if not f[2] then return false end
  redis.call('ZADD', CONSUMER_PINS, f[1] == '' and -1 or f[1], consume_id)
  redis.call('ZADD', CONSUMER_SEEN, f[2], consume_id)
  return true
end

-- true when the consumer's state may be used; state left by a subscription
-- that is gone is dropped.
local function consumer_live(consume_id)
  if subscribed(consume_id) then return true end
  local registered = redis.call('HGET', conkey(consume_id), 'r')
  if registered and tonumber(registered) <= NOW - CONSUMER_GRACE then
    redis.call('DEL', conkey(consume_id))
    unindex_consumer(consume_id)
  elseif not registered then
    unindex_consumer(consume_id)
  end
  return false
end
