-- Persistent consumer ARGV[3]'s subscription was stored (created, or its
-- ttl or subscriber changed): it counts for read-by-all from now on, until
-- ARGV[4], its subscription's expiry (ms). Returns 1, or 0 when the
-- consumer has no state (forgotten meanwhile).
local id = ARGV[3]
if not pin_consumer(id) then return 0 end
redis.call('ZADD', CONSUMER_SUBS, ARGV[4], id)
return 1
