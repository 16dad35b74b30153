-- Forget messages that were copied into the dead-letter queue.
-- ARGV[3..] message ids. Returns the number forgotten.
local n = 0
for i = 3, #ARGV do
  n = n + redis.call('ZREM', DEAD, ARGV[i])
  redis.call('DEL', mkey(ARGV[i]))
end
return n
