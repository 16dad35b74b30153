-- Settle a queue: redeliver expired claims, promote due messages, drop up to
-- ARGV[3] expired messages, forget ended claims.
-- ARGV[4] age (ms) after which an outbox entry is considered abandoned.
-- Returns {dropped count, {abandoned dead ids...}}.
refresh()
local dropped = purge_expired(tonumber(ARGV[3]))
redis.call('ZREMRANGEBYSCORE', CLAIMS, '-inf', NOW)
local abandoned = redis.call('ZRANGEBYSCORE', DEAD, '-inf',
                             NOW - tonumber(ARGV[4]))
return {dropped, abandoned}
