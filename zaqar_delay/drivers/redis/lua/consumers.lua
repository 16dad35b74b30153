-- Persistent consumers of the queue whose subscription is live (see
-- consumer_live in _common.lua): one, or all of them (one per
-- subscription, so few).
-- ARGV[3] consume_id, or '' for every consumer of the queue.
-- Returns {NOW, {consume_id, cursor, handed, lost, last active, ...}}
-- (cursor and handed '' when none).
local ids = {ARGV[3]}
if ARGV[3] == '' then ids = redis.call('ZRANGE', CONSUMERS, 0, -1) end
local out = {}
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', conkey(id), 'c', 'h', 'l', 'a')
  if consumer_live(id) and f[4] then
    local n = #out
    out[n + 1], out[n + 2], out[n + 3] = id, f[1], f[2]
    out[n + 4], out[n + 5] = f[3], f[4]
  end
end
return {NOW, out}
