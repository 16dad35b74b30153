-- Claim (or pop) up to `limit` due, unclaimed messages in position order.
-- ARGV[3] claim id          ARGV[7] max claim count (0: unlimited)
-- ARGV[4] claim ttl (s)     ARGV[8] "1" if a dead-letter queue is set
-- ARGV[5] grace (s)         ARGV[9] redelivery delay (s)
-- ARGV[6] limit             ARGV[10] "claim" or "pop"
-- A message already claimed max-claim-count times is not handed out: it
-- moves to the dead outbox (kept whole, out of every other index) for the
-- caller to copy into the dead-letter queue, or is dropped without one.
-- Returns {NOW, {message wire fields...}, {dead ids...}}.
local cid, ttl, grace = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local limit, max_claims = tonumber(ARGV[6]), tonumber(ARGV[7])
local has_dlq, redelivery, pop = ARGV[8] == '1', ARGV[9], ARGV[10] == 'pop'

refresh()
purge_expired(100)

local claim_expires = NOW + ttl * 1000
local keep_until = claim_expires + grace * 1000
local out, dead, count = {}, {}, 0

while count < limit do
  local popped = redis.call('ZPOPMIN', AVAIL)
  if #popped == 0 then break end
  local id = popped[1]
  local m = read(id)
  if not m then
    drop(id)
  elseif max_claims > 0 and tonumber(m.cc) >= max_claims then
    if has_dlq then
      redis.call('ZREM', MSGS, id)
      redis.call('ZREM', EXPIRY, id)
      redis.call('PERSIST', mkey(id))
      redis.call('ZADD', DEAD, NOW, id)
      dead[#dead + 1] = id
    else
      drop(id)
    end
  else
    count = count + 1
    if pop then
      emit(out, id, m)
      drop(id)
    else
      m.cc = tonumber(m.cc) + 1
      m.claim = cid
      local key = mkey(id)
      redis.call('HSET', key, 'c', cid, 'ce', claim_expires, 'cc', m.cc,
                 'rd', redelivery)
      if tonumber(redis.call('HGET', key, 'e')) < keep_until then
        redis.call('HSET', key, 'e', keep_until)
        redis.call('ZADD', EXPIRY, keep_until, id)
        redis.call('PEXPIREAT', key, keep_until)
      end
      redis.call('ZADD', CLAIMED, claim_expires, id)
      redis.call('ZADD', cmkey(cid), m.pos, id)
      emit(out, id, m)
    end
  end
end

if count > 0 and not pop then
  redis.call('HSET', ckey(cid), 't', ttl, 'e', claim_expires, 'g', grace)
  redis.call('PEXPIREAT', ckey(cid), claim_expires)
  redis.call('PEXPIREAT', cmkey(cid), claim_expires)
  redis.call('ZADD', CLAIMS, claim_expires, cid)
end
return {NOW, out, dead}
