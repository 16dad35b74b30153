-- Forget messages that were copied to the queue their outbox entry names.
-- ARGV[3..] message ids. Returns the number forgotten.
local n = 0
for i = 3, #ARGV do
  n = n + redis.call('ZREM', OUTBOX, ARGV[i])
  redis.call('DEL', mkey(ARGV[i]))
end
return n
