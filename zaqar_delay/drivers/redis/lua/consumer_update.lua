-- After a persistent consumer's page, in one step: the cursor and the last
-- position handed only move forward, lost grows, last active is NOW.
-- ARGV[3] consume_id   ARGV[4] acknowledged position ('' none)
-- ARGV[5] last position handed in this page ('' none)
-- ARGV[6] positions skipped before the page (lost)
-- lost is added only when the page moves "handed" forward: a retried call
-- (same page) or the same page read again counts its skipped positions
-- once. A consumer forgotten meanwhile stays forgotten. A subscribed one
-- is filed as pinning again, with its cursor (see CONSUMER_PINS).
-- Returns 1, or 0 for an unknown consumer.
local key = conkey(ARGV[3])
local f = redis.call('HMGET', key, 'c', 'h')
if not f[1] then return 0 end
local ack, handed = ARGV[4], ARGV[5]
if ack ~= '' and (f[1] == '' or tonumber(ack) > tonumber(f[1])) then
  redis.call('HSET', key, 'c', ack)
end
if handed ~= '' and (f[2] == '' or tonumber(handed) > tonumber(f[2])) then
  redis.call('HSET', key, 'h', handed)
  redis.call('HINCRBY', key, 'l', tonumber(ARGV[6]))
end
redis.call('HSET', key, 'a', NOW)
if redis.call('ZSCORE', CONSUMER_SUBS, ARGV[3]) then pin_consumer(ARGV[3]) end
return 1
