-- Counts of a queue at NOW, from index ranges (no walk over messages):
-- expired messages, ended claims and due messages that are still waiting
-- for a settle step are counted as what they are at NOW. Oldest and
-- newest cover every live message retention keeps, delayed ones included:
-- Zaqar expects them whenever the total is not zero.
-- Groups in flight are groups whose head is claimed: only heads can be.
-- ARGV[3] retention time (ms, 0: none)  ARGV[4] retention length (0: none)
-- ARGV[5] read-by-all cut ('' none, -1: nothing read by all yet)
-- Retention: up to BATCH messages it no longer keeps are removed first;
-- total and free then count only what it keeps (claimed messages, and of
-- the free ones those from where kept ones start). Delayed counts and
-- group counts are exact once no message retention hides is left, which
-- the removal above and the cleanup daemon see to; until then delayed is
-- capped by the free messages kept.
-- Pinned groups (sticky queues) are those pinned to a client still active,
-- after freeing a batch of idle clients' groups (beyond that batch, an
-- idle client's pins count until later claims free them).
-- Returns {NOW, total, claimed, delayed, {oldest wire}, {newest wire},
-- groups, groups in flight, removed by retention so far, groups pinned}.
use_retention(ARGV[3], ARGV[4], ARGV[5])
refresh(BATCH)
purge_expired(BATCH)
trim(BATCH)
sweep_idle(BATCH, redis.call('EXISTS', STICKY_MS) == 1)
local after = '(' .. NOW
local total = redis.call('ZCOUNT', EXPIRY, after, '+inf')
local claimed = redis.call('ZCOUNT', CLAIMED, after, '+inf')
local from = visible_from()
if from then
  -- Of the live free messages, those from where kept ones start.
  local free = math.min(total - claimed,
                        redis.call('ZCOUNT', FREE, score(from), '+inf'))
  total = claimed + math.max(free, 0)
end
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
        redis.call('ZCOUNT', GFLIGHT, after, '+inf'),
        tonumber(redis.call('GET', REMOVED) or 0),
        redis.call('HLEN', PINS)}
