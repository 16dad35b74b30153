-- Persistent consumer ARGV[3]'s subscription was stored (created, or its
-- ttl or subscriber changed): it counts for read-by-all from now on, until
-- its subscription expires: on Redis' clock, as the subscription's hash
-- does (an API node's clock ahead would keep it counting after Redis
-- dropped it); ARGV[4], the expiry (ms) the API node computed, only if
-- the hash is gone or has no ttl. Returns 1, or 0 when the consumer has
-- no state (forgotten meanwhile).
local id = ARGV[3]
if not pin_consumer(id) then return 0 end
redis.call('ZADD', CONSUMER_SUBS, subscription_ends(id) or ARGV[4], id)
return 1
