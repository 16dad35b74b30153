-- Append messages at the tail of a queue.
-- ARGV[3] client UUID
-- ARGV[4] the queue registry's key, '' on a Redis Cluster (another slot:
--         the caller registers the queue itself)
-- ARGV[5] this queue's member of the registry
-- ARGV[6] '1' when every id is new (the first attempt of a post: ids are
--         fresh UUIDs), so the checks below that only a retried post or
--         an outbox copy needs are skipped; 'carry' for messages
--         zaqar-delay-migrate moves in: an id carried in before is
--         skipped too, even once `deleted_id_memory` forgot its deletion,
--         and every id is remembered (CARRIED) until an hour after its
--         message expired; 'retry' for a retry of a post whose ids it
--         made up: an id that left for another queue since (dead letter,
--         moved group: MOVED_OUT) is skipped too, as the first attempt
--         stored it; 'copy:<ms>' for outbox copies, which may bring an
--         id back to a queue it left, but not one that left after <ms>
--         (when the latest of them entered its outbox): this copy, its
--         reply lost or made again by gc, stored that one here before;
--         '0' otherwise
-- ARGV[7..] per message, 7 values: id, ttl (s), delay (s), body, group (''),
--          body checksum ('' when checksums are off), age (ms: 0 for a
--          post; a migrated message keeps its age; ttl and delay count
--          from its creation)
-- A grouped message is filed for claiming only if it heads its group.
-- An id that already exists, or that a consumer deleted lately (bury in
-- _common.lua), is skipped, so neither a retried post nor a repeated
-- outbox copy can duplicate or resurrect a message; a skipped id takes no
-- position, so every position handed out holds a message a persistent
-- consumer could read, and a gap before its next page is a message that
-- went (its `lost`), never a retry.
-- The queue joins the registry (for gc) in the same atomic step as its
-- messages, where the topology allows.
-- Returns {NOW, 1 if the queue held no message and no outbox entry
-- before this call else 0} (on a cluster the caller then registers the
-- queue again).
local was_empty = redis.call('EXISTS', MSGS, OUTBOX) == 0 and 1 or 0
if ARGV[4] ~= '' then redis.call('SADD', ARGV[4], ARGV[5]) end
local stored, seen = {}, {}
local fresh, carry = ARGV[6] == '1', ARGV[6] == 'carry'
local retry = ARGV[6] == 'retry'
local copied_since = tonumber(string.match(ARGV[6], '^copy:(%d+)$'))
local function left_since(id, since)
  local left = redis.call('ZSCORE', MOVED_OUT, id)
  return left and tonumber(left) > since
end
for i = 7, #ARGV, 7 do
  local id = ARGV[i]
  if fresh or (not seen[id] and redis.call('EXISTS', mkey(id)) == 0
               and not redis.call('ZSCORE', DELETED, id)
               and not (carry and redis.call('ZSCORE', CARRIED, id))
               and not (retry and redis.call('ZSCORE', MOVED_OUT, id))
               and not (copied_since and left_since(id, copied_since))) then
    stored[#stored + 1] = i
    seen[id] = true
  end
end
if carry then
  -- Every id of the batch, stored now or before (by a release that kept
  -- no such memory, or a run that stopped after storing it).
  local carried, n = {}, (#ARGV - 6) / 7
  forget_carried(2 * n + 10)
  for i = 7, #ARGV, 7 do
    local created = NOW - tonumber(ARGV[i + 6])
    carried[#carried + 1] = created + tonumber(ARGV[i + 1]) * 1000
                            + CARRIED_MARGIN_MS
    carried[#carried + 1] = ARGV[i]
  end
  send_all('ZADD', CARRIED, carried)
end
if #stored == 0 then return {NOW, was_empty} end
-- A deleted queue keeps its position counter a while (purge.lua): the
-- queue of that name created again goes on from it, and keeps it.
if was_empty == 1 then redis.call('PERSIST', SEQ) end
local pos = redis.call('INCRBY', SEQ, #stored) - #stored
-- The index entries of every message are added with one ZADD per index
-- (send_all), not one per message: a post of 10 sends 4 ZADDs, not 40.
local by_position, by_expiry, ready, delayed = {}, {}, {}, {}
for _, i in ipairs(stored) do
  local id = ARGV[i]
  local key = mkey(id)
  pos = pos + 1
  local created = NOW - tonumber(ARGV[i + 6])
  local expires = created + tonumber(ARGV[i + 1]) * 1000
  local due = created + tonumber(ARGV[i + 2]) * 1000
  local group = ARGV[i + 4]
  local fields = {'b', ARGV[i + 3], 't', ARGV[i + 1], 'cr', created,
                  'e', expires, 'd', due, 'u', ARGV[3], 'p', pos, 'cc', 0}
  if ARGV[i + 5] ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'cs', ARGV[i + 5]
  end
  if group ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'g', group
  end
  redis.call('HSET', key, unpack(fields))
  local n = #by_position
  by_position[n + 1], by_position[n + 2] = pos, id
  n = #by_expiry
  by_expiry[n + 1], by_expiry[n + 2] = expires, id
  if group == '' then
    -- As place() files an ungrouped message (no pin can apply).
    if due > NOW then
      n = #delayed
      delayed[n + 1], delayed[n + 2] = due, delayed_member(id, pos)
    else
      n = #ready
      ready[n + 1], ready[n + 2] = pos, id
    end
  else
    redis.call('ZADD', GROUPS, 0, group)
    redis.call('ZADD', gkey(group), pos, id)
    if redis.call('ZCARD', gkey(group)) == 1 then
      place(id, due, pos, group, expires)
    end
  end
end
send_all('ZADD', MSGS, by_position)
send_all('ZADD', FREE, by_position)
send_all('ZADD', EXPIRY, by_expiry)
send_all('ZADD', AVAIL, ready)
send_all('ZADD', DELAYED, delayed)
return {NOW, was_empty}
