-- Append messages at the tail of a queue.
-- ARGV[3] client UUID
-- ARGV[4..] per message, 5 values: id, ttl (s), delay (s), body, group ('')
-- An id that already exists is skipped, so a retried post cannot duplicate
-- (its position is then left unused: positions only need to increase).
-- Returns NOW.
local count = (#ARGV - 3) / 5
local pos = redis.call('INCRBY', SEQ, count) - count
for i = 4, #ARGV, 5 do
  local id = ARGV[i]
  local key = mkey(id)
  pos = pos + 1
  if redis.call('EXISTS', key) == 0 then
    local expires = NOW + tonumber(ARGV[i + 1]) * 1000
    local due = NOW + tonumber(ARGV[i + 2]) * 1000
    if ARGV[i + 4] == '' then
      redis.call('HSET', key, 'b', ARGV[i + 3], 't', ARGV[i + 1], 'cr', NOW,
                 'e', expires, 'd', due, 'u', ARGV[3], 'p', pos, 'cc', 0)
    else
      redis.call('HSET', key, 'b', ARGV[i + 3], 't', ARGV[i + 1], 'cr', NOW,
                 'e', expires, 'd', due, 'u', ARGV[3], 'p', pos, 'cc', 0,
                 'g', ARGV[i + 4])
    end
    redis.call('PEXPIREAT', key, expires)
    redis.call('ZADD', MSGS, pos, id)
    redis.call('ZADD', EXPIRY, expires, id)
    place(id, due, pos)
  end
end
return NOW
