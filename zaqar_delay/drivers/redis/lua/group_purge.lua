-- Delete up to BATCH messages of one group, claimed or not, from its tail:
-- the head goes last, so the rest stays blocked behind it and order holds
-- between calls. The caller repeats until nothing is left. Purged ids
-- are remembered like deleted ones, so a retried post cannot store them
-- again.
-- ARGV[3] group id (JSON-encoded); ARGV[4] the step's token, ARGV[5] the
-- retry span (ms): a retry of the step (its reply lost) answers what the
-- step did, so the caller's count holds.
-- Returns {number deleted by this call, number of members left}; the
-- call that empties the group also ends a move of it.
local kept = kept_result('pgr', ARGV[4])
if kept then return kept end
local group = ARGV[3]
local ids = redis.call('ZREVRANGE', gkey(group), 0, BATCH - 1)
for _, id in ipairs(ids) do
  local c = redis.call('HGET', mkey(id), 'c')
  if c and c ~= '' then redis.call('ZREM', cmkey(c), id) end
  drop(id)
  bury(id)
end
local left = redis.call('ZCARD', gkey(group))
if left == 0 then
  -- A move of the group in progress ends with it: a member posted later
  -- heads a group of this queue again, and gc's next step of that move
  -- must not take it to the old target. (Batches the move already took
  -- are in the outbox and still land there.)
  redis.call('ZREM', MOVING, group)
  redis.call('HDEL', MOVE_TARGETS, group)
  redis.call('HDEL', MOVE_BATCHES, group)
end
return keep_result('pgr', ARGV[4], ARGV[5], {#ids, left})
