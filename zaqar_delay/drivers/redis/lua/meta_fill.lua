-- Store a copy of the queue's metadata read from the control store,
-- unless it changed since the copy was found missing.
-- ARGV[3] the generation read with the miss ('' for none)
-- ARGV[4] the metadata, JSON    ARGV[5] how long the copy is kept (ms)
-- Returns 1 if stored, 0 if a change came in between.
local gen = redis.call('GET', Q .. ':metagen') or ''
if gen ~= ARGV[3] then return 0 end
redis.call('SET', Q .. ':meta', ARGV[4], 'PX', ARGV[5])
return 1
