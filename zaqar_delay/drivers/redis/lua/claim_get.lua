-- A live claim and its live messages.
-- ARGV[3] claim id
-- Returns {NOW, ttl (s), expires (ms), {message wire fields...}} or {}.
local cid = ARGV[3]
local expires = redis.call('ZSCORE', CLAIMS, cid)
if not expires or tonumber(expires) <= NOW then return {} end
local info = redis.call('HMGET', ckey(cid), 't', 'e')
local out = {}
for _, id in ipairs(redis.call('ZRANGE', cmkey(cid), 0, -1)) do
  local m = read(id)
  if m and m.claim == cid then emit(out, id, m) end
end
return {NOW, info[1], info[2], out}
