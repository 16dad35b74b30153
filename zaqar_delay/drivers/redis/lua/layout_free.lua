-- Layout upgrade 1 -> 2 (layout.py): files into FREE the messages that
-- earlier versions posted before FREE existed, every live message not
-- under a claim, by position. Idempotent (ZADD of what is there changes
-- nothing) and bounded: at most ARGV[4] messages after position ARGV[3]
-- ('' for the first) per call.
-- Returns the last position looked at, or false when the queue is done.
local after = '-inf'
if ARGV[3] ~= '' then after = '(' .. ARGV[3] end
local page = redis.call('ZRANGEBYSCORE', MSGS, after, '+inf', 'WITHSCORES',
                        'LIMIT', 0, tonumber(ARGV[4]))
for i = 1, #page, 2 do
  local id = page[i]
  if not redis.call('ZSCORE', CLAIMED, id) then
    redis.call('ZADD', FREE, page[i + 1], id)
  end
end
if #page < 2 * tonumber(ARGV[4]) then return false end
return page[#page]
