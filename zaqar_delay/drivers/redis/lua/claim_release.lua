-- End a claim now: its messages are claimable again after the redelivery
-- delay recorded at claim time. ARGV[3] claim id. Returns NOW.
local cid = ARGV[3]
for _, id in ipairs(redis.call('ZRANGE', cmkey(cid), 0, -1)) do
  local m = read(id)
  if m and m.claim == cid then
    local key = mkey(id)
    local due = NOW + tonumber(redis.call('HGET', key, 'rd') or 0) * 1000
    redis.call('ZREM', CLAIMED, id)
    redis.call('ZREM', GFLIGHT, id)
    redis.call('HSET', key, 'c', '', 'ce', 0, 'd', due)
    redis.call('ZADD', FREE, m.pos, id)
    place(id, due, tonumber(m.pos), m.group, m.expires)
  end
end
redis.call('DEL', ckey(cid), cmkey(cid))
redis.call('ZREM', CLAIMS, cid)
return NOW
