-- One page of a queue's groups, in group-id order, after a bounded settle
-- (depths count members that expired but wait for purging) and the
-- removal of up to BATCH messages retention no longer keeps (beyond that,
-- depths and heads count members it hides until the cleanup daemon has
-- removed them).
-- ARGV[3] marker (the last group id of the previous page, '' from start)
-- ARGV[4] limit
-- ARGV[5] retention time (ms, 0: none)  ARGV[6] retention length (0: none)
-- ARGV[7] read-by-all cut ('' none, -1: nothing read by all yet)
-- Returns {group, depth, head id, head live claim id or '', live client
-- the group is pinned to or '', ...}.
use_retention(ARGV[5], ARGV[6], ARGV[7])
refresh(BATCH)
purge_expired(BATCH)
trim(BATCH)
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
  out[n + 5] = pinned_to(group) or ''
end
return out
