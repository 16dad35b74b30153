-- Take one group out of this queue, in order, into the outbox bound for
-- another queue, up to MOVE_BATCH messages per call. The caller copies each
-- batch there and forgets it before it asks for the next, so the target
-- receives the group in order. A step that finds the last step's batch
-- still in the outbox hands out what is left of it again instead of the
-- next batch: a mover that stalled and the gc that took its move over (or
-- two gc hosts) then copy that batch, never the one after it, first (the
-- copy skips ids the target holds). From the first batch on, the group is
-- frozen (MOVING): its next member is never filed for claims, so nothing
-- of it is handed out while it moves. gc continues a move whose caller
-- stopped (no step for a while: messages.py).
-- ARGV[3] group id (JSON-encoded)   ARGV[4] target queue name
-- ARGV[5] "start" (a new move) or "continue" (the next batch of one)
-- ARGV[6] the step's token ('' or absent: none), ARGV[7] retry span (ms):
--         a step's result is kept that long under Q:mvr:<token>, so a
--         retry of the step (its reply lost) returns the batch it took
--         instead of "being moved" or the next batch, which the caller
--         would copy ahead of it
-- Each message keeps its remaining ttl and remaining delay.
-- Returns {0, ids in order, 1 if the move is done else 0}; {1} if a new
-- move finds the group's head claimed (moving it would hand it out twice)
-- and nothing was moved; {2, target} if a new move finds the group being
-- moved already.
local group, target, start = ARGV[3], ARGV[4], ARGV[5] == 'start'
local token = ARGV[6]
local kept = kept_result('mvr', token)
if kept then return kept end

local function answer(result)
  return keep_result('mvr', token, ARGV[7], result)
end
-- A moved message costs about twice a dropped one (read, detach, outbox
-- entry), and its batch is then copied to the target by the caller.
local MOVE_BATCH = BATCH / 4
local moving_to = redis.call('HGET', MOVE_TARGETS, group)

local function finish()
  redis.call('ZREM', MOVING, group)
  redis.call('HDEL', MOVE_TARGETS, group)
  redis.call('HDEL', MOVE_BATCHES, group)
  place_head(group)
  return {0, {}, 1}
end

-- What is left in the outbox of the last step's batch (MOVE_BATCH ids
-- at most).
local function uncopied()
  local last = redis.call('HGET', MOVE_BATCHES, group)
  local left = {}
  for _, id in ipairs(last and cmsgpack.unpack(last) or {}) do
    if redis.call('ZSCORE', OUTBOX, id) then left[#left + 1] = id end
  end
  return left
end

if start and moving_to then return {2, moving_to} end
if not start then
  if not moving_to then return {0, {}, 1} end
  local left = uncopied()
  if #left > 0 then
    redis.call('ZADD', MOVING, NOW, group)
    return answer({0, left, 0})
  end
end
local ids = redis.call('ZRANGE', gkey(group), 0, MOVE_BATCH - 1)
local head = ids[1] and read(ids[1])
if start then
  if #ids == 0 then return {0, {}, 1} end
  if head and head.claim ~= '' then return {1} end
  redis.call('HSET', MOVE_TARGETS, group, target)
else
  -- Emptied meanwhile, and a new head posted and claimed since.
  if head and head.claim ~= '' then return finish() end
  target = moving_to
end
redis.call('ZADD', MOVING, NOW, group)

local moved = {}
for _, id in ipairs(ids) do
  local m = read(id)
  if m then
    local ttl = math.ceil((m.expires - NOW) / 1000)
    local delay = math.max(0, math.ceil((m.due - NOW) / 1000))
    to_outbox(id, m.pos, target, ttl, delay)
    moved[#moved + 1] = id
  else
    drop(id)
  end
end
if redis.call('ZCARD', gkey(group)) == 0 then
  finish()
  return answer({0, moved, 1})
end
redis.call('HSET', MOVE_BATCHES, group, cmsgpack.pack(moved))
return answer({0, moved, 0})
