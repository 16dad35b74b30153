-- Take one group out of this queue, in order, into the outbox bound for
-- another queue, up to MOVE_BATCH messages per call. The caller copies each
-- batch there and forgets it before it asks for the next, so the target
-- receives the group in order. From the first batch on, the group is
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
local token = ARGV[6] or ''
local result_key = Q .. ':mvr:' .. token
if token ~= '' then
  local kept = redis.call('GET', result_key)
  if kept then return cmsgpack.unpack(kept) end
end

local function answer(result)
  if token ~= '' then
    redis.call('SET', result_key, cmsgpack.pack(result), 'PX', ARGV[7])
  end
  return result
end
-- A moved message costs about twice a dropped one (read, detach, outbox
-- entry), and its batch is then copied to the target by the caller.
local MOVE_BATCH = BATCH / 4
local moving_to = redis.call('HGET', MOVE_TARGETS, group)

local function finish()
  redis.call('ZREM', MOVING, group)
  redis.call('HDEL', MOVE_TARGETS, group)
  place_head(group)
  return {0, {}, 1}
end

local ids = redis.call('ZRANGE', gkey(group), 0, MOVE_BATCH - 1)
local head = ids[1] and read(ids[1])
if start then
  if moving_to then return {2, moving_to} end
  if #ids == 0 then return {0, {}, 1} end
  if head and head.claim ~= '' then return {1} end
  redis.call('HSET', MOVE_TARGETS, group, target)
else
  if not moving_to then return {0, {}, 1} end
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
return answer({0, moved, 0})
