-- Prepended to every queue script (see scripts.py); the key layout is in
-- keys.py.
--
-- KEYS[1] msgs    zset id -> position      KEYS[6] seq     string
-- KEYS[2] avail   zset id -> position      KEYS[7] claims  zset claim -> exp
-- KEYS[3] delayed zset id -> due (d)       KEYS[8] outbox  zset id -> pos
-- KEYS[4] claimed zset id -> claim expiry  KEYS[9] groups  zset group -> 0
-- KEYS[5] expiry  zset id -> expires     KEYS[10] deleted zset id -> when
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

local MSGS, AVAIL, DELAYED, CLAIMED = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local EXPIRY, SEQ, CLAIMS, OUTBOX = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local GROUPS, DELETED = KEYS[9], KEYS[10]
local Q = ARGV[1]
-- Grouped ids under a claim, scored by claim expiry: the groups in flight
-- are counted from it without walking every claimed id.
local GFLIGHT = Q .. ':gflight'
-- Groups being moved (group -> last step, ms) and where to (group ->
-- target queue); a moving group's next member is never filed for claims.
local MOVING, MOVE_TARGETS = Q .. ':moving', Q .. ':movetargets'

-- Messages settled, purged or scanned per call at most (see above).
local BATCH = 100

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

-- File an unclaimed message under avail (due) or delayed (not yet due).
local function place(id, due, pos)
  if due > NOW then
    redis.call('ZADD', DELAYED, due, delayed_member(id, pos))
  else
    redis.call('ZADD', AVAIL, pos, id)
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
    local f = redis.call('HMGET', mkey(head[1]), 'd', 'c', 'ce')
    if f[1] then
      if live_claim_of(f[2], f[3]) == '' then
        place(head[1], tonumber(f[1]), tonumber(head[2]))
      end
      return
    end
    redis.call('ZREM', gkey(group), head[1])
  end
end

-- Take a message out of every index (and its group, unblocking the next
-- member when it was the head); its hash stays.
local function detach(id)
  local f = redis.call('HMGET', mkey(id), 'g', 'p')
  local group = f[1]
  redis.call('ZREM', MSGS, id)
  redis.call('ZREM', AVAIL, id)
  if f[2] then redis.call('ZREM', DELAYED, delayed_member(id, f[2])) end
  redis.call('ZREM', DELAYED, id)  -- as filed by earlier versions
  redis.call('ZREM', CLAIMED, id)
  redis.call('ZREM', EXPIRY, id)
  if group then
    redis.call('ZREM', GFLIGHT, id)
    local was_head = redis.call('ZRANGE', gkey(group), 0, 0)[1] == id
    redis.call('ZREM', gkey(group), id)
    if was_head then place_head(group) end
  end
end

local function drop(id)
  detach(id)
  redis.call('DEL', mkey(id))
end

-- Remember that a consumer deleted `id`, so that a retried post or a
-- repeated outbox copy cannot store it again (post.lua skips buried ids).
local function bury(id)
  redis.call('ZADD', DELETED, NOW, id)
end

-- Forget at most `batch` ids deleted more than `memory_ms` ago: bounded
-- work per call, and every deleting script calls it, so the set keeps pace.
local function forget_buried(memory_ms, batch)
  local old = redis.call('ZRANGEBYSCORE', DELETED, '-inf',
                         NOW - tonumber(memory_ms), 'LIMIT', 0, batch)
  if #old > 0 then redis.call('ZREM', DELETED, unpack(old)) end
  return #old
end

-- Claims that ended by expiry: redeliver up to n of their messages, after
-- the redelivery delay recorded when they were claimed.
local function release_expired_claims(n)
  local ids = redis.call('ZRANGEBYSCORE', CLAIMED, '-inf', NOW,
                         'LIMIT', 0, n)
  for _, id in ipairs(ids) do
    redis.call('ZREM', CLAIMED, id)
    redis.call('ZREM', GFLIGHT, id)
    local f = redis.call('HMGET', mkey(id), 'p', 'ce', 'rd')
    if f[1] then
      local due = tonumber(f[2]) + tonumber(f[3] or 0) * 1000
      redis.call('HSET', mkey(id), 'c', '', 'ce', 0, 'd', due)
      place(id, due, tonumber(f[1]))
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
    if pos then redis.call('ZADD', AVAIL, pos, id) end
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
  for _, id in ipairs(ids) do drop(id) end
  return #ids
end

local MESSAGE_FIELDS = {'b', 't', 'cr', 'cc', 'c', 'ce', 'p', 'e', 'd', 'u',
                        'g', 'cs'}

local function read(id)
  local f = redis.call('HMGET', mkey(id), unpack(MESSAGE_FIELDS))
  if not f[1] or tonumber(f[8]) <= NOW then return nil end
  return {body = f[1], ttl = f[2], created = f[3], cc = f[4],
          claim = live_claim_of(f[5], f[6]), pos = f[7],
          expires = tonumber(f[8]), due = tonumber(f[9]), client = f[10],
          group = f[11] or '', checksum = f[12] or ''}
end

-- Wire format of one message: id, body, ttl, created, claim count,
-- live claim id ('' if none), position, group ('' if none), body checksum
-- ('' if none).
local WIRE_FIELDS, WIRE_GROUP = 9, 8
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
end

-- Keep a claimed message alive until `keep_until` (ms); like Zaqar's
-- drivers, its visible ttl grows to the claim's ttl + grace when that is
-- longer than its own.
local function keep_alive(id, m, keep_until, claim_lifetime)
  if m.expires >= keep_until then return end
  local key = mkey(id)
  redis.call('HSET', key, 'e', keep_until)
  redis.call('ZADD', EXPIRY, keep_until, id)
  if tonumber(m.ttl) < claim_lifetime then
    redis.call('HSET', key, 't', claim_lifetime)
    m.ttl = claim_lifetime
  end
  m.expires = keep_until
end

-- The oldest (sort 1) or newest (-1) live message, claimed or not; only
-- due ones when due_only. At most BATCH ids are read: past them (a crowd
-- of expired messages not yet purged, or of delayed ones), the answer
-- comes from an index instead, a live message near that end: the first
-- or last claimable one when due_only, else the one that expires soonest
-- (oldest) or last (newest).
local function first_live(sort, due_only)
  local range = sort == 1 and 'ZRANGE' or 'ZREVRANGE'
  local start, step = 0, 50
  while start < BATCH do
    local ids = redis.call(range, MSGS, start, start + step - 1)
    if #ids == 0 then return nil end
    for _, id in ipairs(ids) do
      local m = read(id)
      if m and (m.due <= NOW or not due_only) then return id, m end
    end
    start = start + step
  end
  local near
  if due_only then
    near = redis.call(range, AVAIL, 0, 0)
  elseif sort == 1 then
    near = redis.call('ZRANGEBYSCORE', EXPIRY, '(' .. NOW, '+inf',
                      'LIMIT', 0, 1)
  else
    near = redis.call('ZREVRANGE', EXPIRY, 0, 0)
  end
  if near[1] then
    local m = read(near[1])
    if m then return near[1], m end
  end
  return nil
end

-- Move a detached message to the outbox, bound for queue `to` with ttl
-- `ttl` and delay `delay` (seconds); the caller copies it there.
local function to_outbox(id, pos, to, ttl, delay)
  detach(id)
  redis.call('HSET', mkey(id), 'to', to, 'tt', ttl, 'td', delay, 'ob', NOW)
  redis.call('ZADD', OUTBOX, pos, id)
end
