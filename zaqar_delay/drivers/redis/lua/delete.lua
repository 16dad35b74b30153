-- Delete one message, honouring claims.
-- ARGV[3] message id   ARGV[4] claim id ('' when none was given)
-- ARGV[5] deleted-id memory (ms): the id is remembered this long (bury)
-- ARGV[6] client deleting ('' when unknown; keeps a sticky client active)
-- Returns 0 deleted (or absent), 1 not claimed, 2 claimed by another claim,
-- 3 claimed but no claim given.
local id, cid = ARGV[3], ARGV[4]
touch(ARGV[6])
-- Only the fields deciding the delete (not the body, as read() would).
local f = redis.call('HMGET', mkey(id), 'e', 'c', 'ce', 'g', 'p')
if not f[1] or tonumber(f[1]) <= NOW then
  drop(id)
  return 0
end
local claim = live_claim_of(f[2], f[3])
if cid ~= '' then
  if claim == '' then return 1 end
  if claim ~= cid then return 2 end
elseif claim ~= '' then
  return 3
end
if claim ~= '' then redis.call('ZREM', cmkey(claim), id) end
drop(id, {f[4], f[5]})
bury(id)
forget_buried(ARGV[5], 10)
return 0
