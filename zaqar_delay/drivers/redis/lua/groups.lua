-- One page of a queue's groups, in group-id order, after a bounded settle
-- (depths count members that expired but wait for purging).
-- ARGV[3] marker (the last group id of the previous page, '' from start)
-- ARGV[4] limit
-- Returns {group, depth, head id, head live claim id or '', ...}.
refresh(BATCH)
purge_expired(BATCH)
local from = '-'
if ARGV[3] ~= '' then from = '(' .. ARGV[3] end
local out = {}
for _, group in ipairs(redis.call('ZRANGEBYLEX', GROUPS, from, '+', 'LIMIT',
                                  0, tonumber(ARGV[4]))) do
  local head = redis.call('ZRANGE', gkey(group), 0, 0)[1]
  local f = redis.call('HMGET', mkey(head), 'c', 'ce')
  local n = #out
  out[n + 1] = group
  out[n + 2] = redis.call('ZCARD', gkey(group))
  out[n + 3] = head
  out[n + 4] = live_claim_of(f[1], f[2])
end
return out
