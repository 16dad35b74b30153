-- Delete up to BATCH messages of one group, claimed or not, from its tail:
-- the head goes last, so the rest stays blocked behind it and order holds
-- between calls. The caller repeats until nothing is left. Purged ids
-- are remembered like deleted ones, so a retried post cannot store them
-- again.
-- ARGV[3] group id (JSON-encoded).
-- Returns {number deleted by this call, number of members left}.
local group = ARGV[3]
local ids = redis.call('ZREVRANGE', gkey(group), 0, BATCH - 1)
for _, id in ipairs(ids) do
  local c = redis.call('HGET', mkey(id), 'c')
  if c and c ~= '' then redis.call('ZREM', cmkey(c), id) end
  drop(id)
  bury(id)
end
return {#ids, redis.call('ZCARD', gkey(group))}
