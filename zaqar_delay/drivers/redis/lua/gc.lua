-- Settle a queue by one bounded step: redeliver up to ARGV[3] expired
-- claims, promote as many due messages, forget as many ended claims, drop
-- as many expired messages; the caller repeats while there is more.
-- ARGV[4] age (ms) after which an outbox entry or a group move that made
-- no progress is considered abandoned; ARGV[3] outbox entries (by
-- position, each call after where the last one stopped) and moves are
-- looked at per call.
-- ARGV[5] deleted-id memory (ms): up to ARGV[3] older deleted (and moved
--         out) ids are forgotten, and as many carried ids whose messages
--         expired.
-- It also frees up to BATCH groups of a sticky client gone idle, so that
-- pins do not outlive their client on a queue nobody claims on again.
-- Returns {dropped count, {abandoned outbox ids...}, {abandoned moves'
-- group ids...}, 1 if a step hit its bound else 0}.
local batch, age = tonumber(ARGV[3]), tonumber(ARGV[4])
-- A deleted queue's position counter is kept a day (purge.lua); the
-- first post to the queue created again keeps it for good, unless that
-- post came from a node of an earlier release: a queue with messages
-- keeps it for good here too.
if redis.call('EXISTS', MSGS) == 1 then redis.call('PERSIST', SEQ) end
local more = refresh(batch)
local dropped = purge_expired(batch)
-- Scripts that bury ids (a stats call's or a claim's removals, a
-- group's purge, dead letters) forget no more than they bury, some none:
-- gc's step repeats until every set is caught up, so none grows past the
-- memory however fast a tenant fills it.
local forgot = math.max(forget_buried(ARGV[5], batch),
                        forget_carried(batch))
sweep_idle(BATCH, redis.call('EXISTS', STICKY_MS) == 1)
-- The outbox is looked at a batch a call, each after where the last
-- stopped and from the start again once it reached the end: an abandoned
-- entry is found however many younger ones stand ahead of it (from the
-- start each time, it waited while a steady batch of moves was in
-- flight ahead of it).
local after = redis.call('GET', OUTBOX_SCAN)
local looked = redis.call('ZRANGEBYSCORE', OUTBOX,
                          after and '(' .. after or '-inf', '+inf',
                          'WITHSCORES', 'LIMIT', 0, batch)
if #looked < 2 * batch then
  redis.call('DEL', OUTBOX_SCAN)
else
  -- Kept a day: a queue deleted meanwhile leaves nothing for long.
  redis.call('SET', OUTBOX_SCAN, looked[#looked], 'PX', 86400000)
end
local abandoned = {}
for i = 1, #looked, 2 do
  local id = looked[i]
  local since = redis.call('HGET', mkey(id), 'ob')
  if not since or tonumber(since) <= NOW - age then
    abandoned[#abandoned + 1] = id
  end
end
local stale = redis.call('ZRANGEBYSCORE', MOVING, '-inf', NOW - age,
                         'LIMIT', 0, batch)
return {dropped, abandoned, stale,
        (more or dropped == batch or forgot == batch) and 1 or 0}
