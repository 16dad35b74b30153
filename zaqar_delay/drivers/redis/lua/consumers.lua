-- Persistent consumers of the queue whose subscription is live (see
-- consumer_live in _common.lua): one, or a page of all of them in
-- registration order (the operator's listing; read-by-all and stats use
-- readers.lua instead).
-- ARGV[3] consume_id, or '' for a page of every consumer of the queue
-- ARGV[4] the page's first rank in CONSUMERS  ARGV[5] page size
-- Returns {NOW, {consume_id, cursor, handed, lost, last active, ...}}
-- (cursor and handed '' when none), and the next page's first rank ('':
-- none).
local ids, next_rank = {ARGV[3]}, ''
if ARGV[3] == '' then
  local first, size = tonumber(ARGV[4]), tonumber(ARGV[5])
  ids = redis.call('ZRANGE', CONSUMERS, first, first + size - 1)
  if #ids == size then next_rank = first + size end
end
local out = {}
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', conkey(id), 'c', 'h', 'l', 'a')
  if consumer_live(id) and f[4] then
    local n = #out
    out[n + 1], out[n + 2], out[n + 3] = id, f[1], f[2]
    out[n + 4], out[n + 5] = f[3], f[4]
  elseif ARGV[3] == '' and next_rank ~= ''
      and not redis.call('ZSCORE', CONSUMERS, id) then
    -- a dropped one left CONSUMERS: the next page starts a rank earlier
    -- (one in its grace, registered with no subscription yet, stays)
    next_rank = next_rank - 1
  end
end
return {NOW, out, next_rank}
