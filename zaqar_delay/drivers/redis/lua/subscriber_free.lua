-- Free subscriber URI ARGV[3] if subscription ARGV[4] still holds it: a
-- delete or update retried after its reply was lost, or the cleanup of
-- an expired subscription, must not free the URI for a subscription
-- that took it since. Returns 1 if it was freed.
local subscribers = Q .. ':subscribers'
if redis.call('HGET', subscribers, ARGV[3]) == ARGV[4] then
  redis.call('HDEL', subscribers, ARGV[3])
  return 1
end
return 0
