-- Register persistent consumer ARGV[3] (its subscription is stored right
-- after): no cursor, active now. Idempotent: a live consumer, or one
-- registered within the grace (a retried create), is left as it is; state
-- left by an expired or deleted subscription starts afresh.
-- Returns 1 when it was created, else 0.
local id = ARGV[3]
local key = conkey(id)
if redis.call('EXISTS', key) == 1 then
  local registered = tonumber(redis.call('HGET', key, 'r') or 0)
  if subscribed(id) or registered > NOW - CONSUMER_GRACE then return 0 end
end
redis.call('DEL', key)
unindex_consumer(id)
-- The queue's first consumer: none from before the indexes to file.
if redis.call('EXISTS', CONSUMERS) == 0 then
  redis.call('SET', INDEXED, 'done')
end
redis.call('HSET', key, 'c', '', 'h', '', 'l', 0, 'a', NOW, 'r', NOW)
redis.call('ZADD', CONSUMERS, NOW, id)
return 1
