-- Delete one message, honouring claims.
-- ARGV[3] message id   ARGV[4] claim id ('' when none was given)
-- ARGV[5] deleted-id memory (ms): the id is remembered this long (bury)
-- ARGV[6] client deleting ('' when unknown; keeps a sticky client active)
-- Returns 0 deleted (or absent), 1 not claimed, 2 claimed by another claim,
-- 3 claimed but no claim given.
local id, cid = ARGV[3], ARGV[4]
touch(ARGV[6])
local m = read(id)
if not m then
  drop(id)
  return 0
end
if cid ~= '' then
  if m.claim == '' then return 1 end
  if m.claim ~= cid then return 2 end
elseif m.claim ~= '' then
  return 3
end
if m.claim ~= '' then redis.call('ZREM', cmkey(m.claim), id) end
drop(id)
bury(id)
forget_buried(ARGV[5], 10)
return 0
