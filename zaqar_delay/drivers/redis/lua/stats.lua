-- Counts of a queue at NOW, from index ranges (no walk over messages):
-- expired messages, ended claims and due messages that are still waiting
-- for a settle step are counted as what they are at NOW. Oldest and
-- newest cover every live message, delayed ones included: Zaqar expects
-- them whenever the total is not zero.
-- Groups in flight are groups whose head is claimed: only heads can be.
-- Returns {NOW, total, claimed, delayed, {oldest wire}, {newest wire},
-- groups, groups in flight}.
refresh(BATCH)
purge_expired(BATCH)
local after = '(' .. NOW
local total = redis.call('ZCOUNT', EXPIRY, after, '+inf')
local claimed = redis.call('ZCOUNT', CLAIMED, after, '+inf')
-- An expired delayed message (ttl < delay) not yet purged is in neither.
local delayed = math.min(redis.call('ZCOUNT', DELAYED, after, '+inf'),
                         total - claimed)
local oldest, newest = {}, {}
if total > 0 then
  local id, m = first_live(1, false)
  if id then emit(oldest, id, m) end
  id, m = first_live(-1, false)
  if id then emit(newest, id, m) end
end
return {NOW, total, claimed, delayed, oldest, newest,
        redis.call('ZCARD', GROUPS),
        redis.call('ZCOUNT', GFLIGHT, after, '+inf')}
