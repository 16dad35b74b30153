-- Unpin one group of a sticky queue (operator): its head goes back under
-- avail, for whichever client claims first. ARGV[3] group (encoded).
-- Returns the client it was pinned to, or ''.
local client = redis.call('HGET', PINS, ARGV[3])
if not client then return '' end
unpin(ARGV[3], client)
return client
