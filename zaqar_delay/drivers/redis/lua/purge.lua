-- Delete every message and claim of a queue (queue deletion).
-- ARGV[3] batch size. ARGV[4] the deletion's token (the same for each of
-- its calls). Returns the number of ids removed (or consumers reset) in
-- this call; the caller repeats until 0, so no single call blocks Redis
-- for long.
local batch, token = tonumber(ARGV[3]), ARGV[4] or ''
local PURGE_SCAN = Q .. ':purgescan'
local SEQ_KEPT_MS = 86400 * 1000
local ids = redis.call('ZRANGE', MSGS, 0, batch - 1)
for _, id in ipairs(ids) do drop(id) end
local outbox = redis.call('ZRANGE', OUTBOX, 0, batch - 1)
for _, id in ipairs(outbox) do
  redis.call('ZREM', OUTBOX, id)
  redis.call('DEL', mkey(id))
end
-- Group indexes go once the messages are gone (dropping them empties
-- their groups), so no call deletes a whole large group at once.
local groups = {}
if #ids == 0 then
  groups = redis.call('ZRANGE', GROUPS, 0, batch - 1)
  for _, group in ipairs(groups) do
    redis.call('ZREM', GROUPS, group)
    redis.call('DEL', gkey(group))
  end
end
-- Sticky clients' pins, `batch` per call once the messages are gone (so
-- their pinned heads were dropped above): a client holds a pin for every
-- group it took while active, which outlives the group, so a client's
-- set is never deleted whole.
local clients, unpinned = {}, {}
if #ids == 0 then
  clients = redis.call('ZRANGE', ACTIVE, 0, 0)
  for _, client in ipairs(clients) do
    unpinned = redis.call('SPOP', pinned_groups(client), batch)
    if #unpinned > 0 then redis.call('HDEL', PINS, unpack(unpinned)) end
    if redis.call('EXISTS', pinned_groups(client)) == 0 then
      redis.call('ZREM', ACTIVE, client)
      redis.call('DEL', pinned_avail(client))
    end
  end
end
local claims = redis.call('ZRANGE', CLAIMS, 0, batch - 1)
for _, cid in ipairs(claims) do
  redis.call('ZREM', CLAIMS, cid)
  redis.call('DEL', ckey(cid), cmkey(cid))
end
local deleted = redis.call('ZRANGE', DELETED, 0, batch - 1)
if #deleted > 0 then redis.call('ZREM', DELETED, unpack(deleted)) end
local carried = redis.call('ZRANGE', CARRIED, 0, batch - 1)
if #carried > 0 then redis.call('ZREM', CARRIED, unpack(carried)) end
local moved = redis.call('ZRANGE', MOVED_OUT, 0, batch - 1)
if #moved > 0 then redis.call('ZREM', MOVED_OUT, unpack(moved)) end
local n = #ids + #outbox + #claims + #groups + #deleted + #clients
          + #unpinned + #carried + #moved
if n == 0 then
  redis.call('DEL', MSGS, AVAIL, DELAYED, CLAIMED, EXPIRY, CLAIMS,
             OUTBOX, OUTBOX_SCAN, GROUPS, GFLIGHT, MOVING, MOVE_TARGETS,
             MOVE_BATCHES, FREE, REMOVED, FLOOR, READFLOOR, PINS, STICKY_MS)
  -- The position counter stays a day (a post to the queue created again
  -- keeps it): a call that read positions before the deletion (a
  -- consumer's page storing its cursor, a cleanup's read-by-all cut)
  -- and writes after it then names positions below every message of
  -- the queue created again, not some of them.
  redis.call('PEXPIRE', SEQ, SEQ_KEPT_MS)
  -- Positions may start again from 1 once it is gone: a cursor from
  -- before would skip the messages of the queue created again, so its
  -- persistent consumers start afresh, a batch per call (Zaqar does not
  -- bound subscriptions).
  -- ZSCAN returns every consumer there throughout the scan at least once,
  -- whatever registers or leaves meanwhile; each deletion keeps its own
  -- cursor under its token, so a deletion cut short never lends a later
  -- one a cursor halfway through, and two at once (a client sending the
  -- DELETE again while the first runs) do not restart each other's scan.
  local step = redis.call('ZSCAN', CONSUMERS,
                          redis.call('HGET', PURGE_SCAN, token) or '0',
                          'COUNT', batch)
  for i = 1, #step[2], 2 do
    local cid = step[2][i]
    redis.call('HSET', conkey(cid), 'c', '', 'h', '')
    if redis.call('ZSCORE', CONSUMER_PINS, cid) then
      redis.call('ZADD', CONSUMER_PINS, -1, cid)
    end
  end
  if step[1] ~= '0' then
    redis.call('HSET', PURGE_SCAN, token, step[1])
    redis.call('PEXPIRE', PURGE_SCAN, 3600 * 1000)
    return math.max(1, #step[2] / 2)
  end
  -- Done: cursors of deletions cut short go too (one still running
  -- starts its scan again, once).
  redis.call('DEL', PURGE_SCAN)
end
return n
