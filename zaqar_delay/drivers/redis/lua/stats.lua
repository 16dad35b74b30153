-- Counts of a queue after settling due and expired messages. Oldest and
-- newest cover every live message, delayed ones included: Zaqar expects
-- them whenever the total is not zero.
-- Returns {NOW, total, claimed, delayed, {oldest wire}, {newest wire}}.
refresh()
purge_expired(nil)
local oldest, newest = {}, {}
local id, m = first_live(1, false)
if id then emit(oldest, id, m) end
id, m = first_live(-1, false)
if id then emit(newest, id, m) end
return {NOW, redis.call('ZCARD', MSGS), redis.call('ZCARD', CLAIMED),
        redis.call('ZCARD', DELAYED), oldest, newest}
