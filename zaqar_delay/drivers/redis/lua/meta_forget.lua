-- Forget the queue's metadata copy (metadata.py): the control store's
-- metadata is about to change, or just did. The generation lets a fill
-- that read the control store before the change see that it is stale.
-- ARGV[3] how long the generation outlives this change (ms)
-- Returns the new generation.
local gen = redis.call('INCR', Q .. ':metagen')
redis.call('PEXPIRE', Q .. ':metagen', ARGV[3])
redis.call('DEL', Q .. ':meta')
return gen
