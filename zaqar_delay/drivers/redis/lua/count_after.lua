-- How many messages retention keeps after a position (a consumer's lag),
-- from index counts, however long the queue: the claimed ones after it
-- (in msgs but not in free) and the free ones from where kept ones start.
-- ARGV[3] position ('' for every message)
-- ARGV[4] retention time (ms, 0: none)  ARGV[5] retention length (0: none)
-- ARGV[6] read-by-all cut ('' none, -1: nothing read by all yet)
-- Returns the count.
use_retention(ARGV[4], ARGV[5], ARGV[6])
settle_for_retention()
purge_expired(BATCH)
local after = '-inf'
if ARGV[3] ~= '' then after = '(' .. ARGV[3] end
local claimed = redis.call('ZCOUNT', MSGS, after, '+inf')
  - redis.call('ZCOUNT', FREE, after, '+inf')
local from = visible_from()
if from and (ARGV[3] == '' or from > tonumber(ARGV[3])) then
  after = score(from)
end
return claimed + redis.call('ZCOUNT', FREE, after, '+inf')
