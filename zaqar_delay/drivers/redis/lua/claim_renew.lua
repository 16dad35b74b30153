-- Reset a live claim's expiry to NOW + ttl; keep its messages alive until
-- then + grace. ARGV[3] claim id, ARGV[4] ttl (s), ARGV[5] grace (s),
-- ARGV[6] client renewing ('' when unknown; keeps a sticky client active).
-- Returns 1, or 0 if the claim is not live.
local cid, ttl, grace = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
touch(ARGV[6])
local expires = redis.call('ZSCORE', CLAIMS, cid)
if not expires or tonumber(expires) <= NOW then return 0 end
local claim_expires = NOW + ttl * 1000
local keep_until = claim_expires + grace * 1000
for _, id in ipairs(redis.call('ZRANGE', cmkey(cid), 0, -1)) do
  local m = read(id)
  if m and m.claim == cid then
    local key = mkey(id)
    redis.call('HSET', key, 'ce', claim_expires)
    redis.call('ZADD', CLAIMED, claim_expires, id)
    if m.group ~= '' then redis.call('ZADD', GFLIGHT, claim_expires, id) end
    keep_alive(id, m, keep_until, ttl + grace)
  end
end
redis.call('HSET', ckey(cid), 't', ttl, 'e', claim_expires, 'g', grace)
redis.call('PEXPIREAT', ckey(cid), claim_expires)
redis.call('PEXPIREAT', cmkey(cid), claim_expires)
redis.call('ZADD', CLAIMS, claim_expires, cid)
return 1
