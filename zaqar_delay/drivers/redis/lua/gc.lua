-- Settle a queue: redeliver expired claims, promote due messages, forget
-- ended claims, drop up to ARGV[3] expired messages.
-- ARGV[4] age (ms) after which an outbox entry is considered abandoned.
-- ARGV[5] deleted-id memory (ms): up to ARGV[3] older deleted ids are
--         forgotten.
-- Returns {dropped count, {abandoned outbox ids...}}.
refresh()
local dropped = purge_expired(tonumber(ARGV[3]))
forget_buried(ARGV[5], tonumber(ARGV[3]))
local abandoned = {}
for _, id in ipairs(redis.call('ZRANGE', OUTBOX, 0, -1)) do
  local since = redis.call('HGET', mkey(id), 'ob')
  if not since or tonumber(since) <= NOW - tonumber(ARGV[4]) then
    abandoned[#abandoned + 1] = id
  end
end
return {dropped, abandoned}
