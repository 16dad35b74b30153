-- What read-by-all needs of the persistent consumers, from indexes
-- (CONSUMER_SUBS, CONSUMER_PINS, CONSUMER_SEEN in _common.lua): the number
-- of live ones (active within the idle time) and their lowest cursor, in
-- a few index reads whatever the number of consumers. On the way it
-- takes out of the pinning indexes up to ARGV[4] consumers met idle (the
-- lowest cursors first) and drops up to as many whose subscription
-- expired; each consumer leaves once per idle period, so this work is
-- paid for by the pages that made them active. Consumers subscribed
-- before these indexes existed are filed, ARGV[4] per call.
-- ARGV[3] idle time (ms)  ARGV[4] consumers taken out per call at most
-- Returns {NOW, 1 when done (else call again: the bound was reached),
-- live consumers, subscribed consumers, lowest live cursor (-1: one has
-- acknowledged nothing; '' with no live consumer)}.
local idle_ms, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local idle_from = NOW - idle_ms        -- active at or before: idle

local function unfinished()
  return {NOW, 0, 0, 0, ''}
end

-- Consumers registered before the indexes: filed once, by ZSCAN (which
-- returns every member present throughout), a bounded step per call.
local scan = redis.call('GET', INDEXED)
if scan ~= 'done' and redis.call('EXISTS', CONSUMERS) == 1 then
  local step = redis.call('ZSCAN', CONSUMERS, scan or '0', 'COUNT', budget)
  for i = 1, #step[2], 2 do
    local id = step[2][i]
    local ends = subscription_ends(id)
    if ends and pin_consumer(id) then
      redis.call('ZADD', CONSUMER_SUBS, ends, id)
    end
  end
  redis.call('SET', INDEXED, step[1] == '0' and 'done' or step[1])
  if step[1] ~= '0' then return unfinished() end
end

-- Subscriptions past their expiry: dropped once Redis has expired them
-- (its clock and the stored expiry may differ by a second: looked at
-- again a second later).
local expired = redis.call('ZRANGEBYSCORE', CONSUMER_SUBS, '-inf', NOW,
                           'LIMIT', 0, budget)
local dropped = 0
for _, id in ipairs(expired) do
  if subscribed(id) then
    redis.call('ZADD', CONSUMER_SUBS, NOW + 1000, id)
  else
    redis.call('DEL', conkey(id))
    unindex_consumer(id)
    dropped = dropped + 1
  end
end
if dropped == budget then return unfinished() end

-- The lowest cursor among the pinning consumers, taking out the idle ones
-- and those whose subscription is gone met before it.
local lowest, taken = '', 0
while true do
  local low = redis.call('ZRANGE', CONSUMER_PINS, 0, 0, 'WITHSCORES')
  if #low == 0 then break end
  local id = low[1]
  local seen = tonumber(redis.call('ZSCORE', CONSUMER_SEEN, id) or 0)
  if seen > idle_from and consumer_live(id) then
    lowest = tonumber(low[2])
    break
  end
  redis.call('ZREM', CONSUMER_PINS, id)
  redis.call('ZREM', CONSUMER_SEEN, id)
  taken = taken + 1
  if taken == budget then return unfinished() end
end
local live = redis.call('ZCOUNT', CONSUMER_SEEN, '(' .. idle_from, '+inf')
return {NOW, 1, live, redis.call('ZCARD', CONSUMER_SUBS), lowest}
