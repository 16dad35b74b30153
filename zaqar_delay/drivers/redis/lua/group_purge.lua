-- Delete every message of one group, claimed or not.
-- ARGV[3] group id (JSON-encoded). Returns the number deleted.
local group = ARGV[3]
local ids = redis.call('ZRANGE', gkey(group), 0, -1)
redis.call('DEL', gkey(group))
redis.call('ZREM', GROUPS, group)
for _, id in ipairs(ids) do
  local c = redis.call('HGET', mkey(id), 'c')
  if c and c ~= '' then redis.call('ZREM', cmkey(c), id) end
  drop(id)
end
return #ids
