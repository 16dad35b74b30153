-- Delete every message and claim of a queue (queue deletion).
-- ARGV[3] batch size. Returns the number of ids removed in this call; the
-- caller repeats until 0, so no single call blocks Redis for long.
local batch = tonumber(ARGV[3])
local ids = redis.call('ZRANGE', MSGS, 0, batch - 1)
for _, id in ipairs(ids) do drop(id) end
local dead = redis.call('ZRANGE', DEAD, 0, batch - 1)
for _, id in ipairs(dead) do
  redis.call('ZREM', DEAD, id)
  redis.call('DEL', mkey(id))
end
local claims = redis.call('ZRANGE', CLAIMS, 0, batch - 1)
for _, cid in ipairs(claims) do
  redis.call('ZREM', CLAIMS, cid)
  redis.call('DEL', ckey(cid), cmkey(cid))
end
local n = #ids + #dead + #claims
if n == 0 then
  redis.call('DEL', MSGS, AVAIL, DELAYED, CLAIMED, EXPIRY, SEQ, CLAIMS, DEAD)
end
return n
