-- Counts of a queue after settling due and expired messages. Oldest and
-- newest cover every live message, delayed ones included: Zaqar expects
-- them whenever the total is not zero.
-- Groups in flight are groups whose head is claimed: only heads can be.
-- Returns {NOW, total, claimed, delayed, {oldest wire}, {newest wire},
-- groups, groups in flight}.
refresh()
purge_expired(nil)
local oldest, newest = {}, {}
local id, m = first_live(1, false)
if id then emit(oldest, id, m) end
id, m = first_live(-1, false)
if id then emit(newest, id, m) end
local in_flight = 0
if redis.call('ZCARD', GROUPS) > 0 then
  for _, claimed in ipairs(redis.call('ZRANGE', CLAIMED, 0, -1)) do
    if redis.call('HEXISTS', mkey(claimed), 'g') == 1 then
      in_flight = in_flight + 1
    end
  end
end
return {NOW, redis.call('ZCARD', MSGS), redis.call('ZCARD', CLAIMED),
        redis.call('ZCARD', DELAYED), oldest, newest,
        redis.call('ZCARD', GROUPS), in_flight}
