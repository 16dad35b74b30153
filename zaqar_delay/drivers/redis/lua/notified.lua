-- A page of the subscriptions Zaqar's notifier reaches on every post:
-- those of Q:notified (every subscription but the persistent consumers',
-- whose cursor: subscribers read by listing), so the notifier's listing
-- costs the same whatever the number of consumers. Subscriptions stored
-- before this index existed are filed once, by ZSCAN of Q:subs (which
-- returns every member present throughout), ARGV[5] per call; ids whose
-- subscription is gone (expired) leave the index when met, as many per
-- call at most.
-- ARGV[3] marker: the last id of the previous page, '' for none
-- ARGV[4] page size  ARGV[5] subscriptions filed or dropped per call
-- Returns {0} when the bound was reached (call again), else {1, id,
-- {s, u, t, e, o, c}, id, {...}, ...} in id order.
local SUBS, NOTIFIED = Q .. ':subs', Q .. ':notified'
local NOTIFIED_INDEXED = Q .. ':nindexed'
local budget = tonumber(ARGV[5])
local function skey(sid) return Q .. ':s:' .. sid end

local scan = redis.call('GET', NOTIFIED_INDEXED)
if scan ~= 'done' then
  local step = redis.call('ZSCAN', SUBS, scan or '0', 'COUNT', budget)
  for i = 1, #step[2], 2 do
    local subscriber = redis.call('HGET', skey(step[2][i]), 'u')
    if subscriber and string.sub(subscriber, 1, 7) ~= 'cursor:' then
      redis.call('ZADD', NOTIFIED, step[2][i + 1], step[2][i])
    end
  end
  redis.call('SET', NOTIFIED_INDEXED, step[1] == '0' and 'done' or step[1])
  if step[1] ~= '0' then return {0} end
end

-- As Zaqar's own drivers: an unknown marker lists from the start.
local rank = ARGV[3] ~= '' and redis.call('ZRANK', NOTIFIED, ARGV[3])
rank = rank and rank + 1 or 0
local limit = tonumber(ARGV[4])
local out, found, dropped = {1}, 0, 0
while found < limit do
  local ids = redis.call('ZRANGE', NOTIFIED, rank, rank + limit - found - 1)
  if #ids == 0 then break end
  for _, sid in ipairs(ids) do
    local fields = redis.call('HMGET', skey(sid), 's', 'u', 't', 'e', 'o',
                              'c')
    if fields[1] then
      out[#out + 1] = sid
      out[#out + 1] = fields
      found, rank = found + 1, rank + 1
    else
      redis.call('ZREM', NOTIFIED, sid)
      dropped = dropped + 1
    end
  end
  if dropped >= budget then return {0} end
end
return out
