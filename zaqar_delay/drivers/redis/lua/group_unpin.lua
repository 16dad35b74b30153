-- Unpin one group of a sticky queue (operator): its head goes back under
-- avail, for whichever client claims first. ARGV[3] group (encoded).
-- ARGV[4] the call's token, ARGV[5] retry span (ms): the result is kept
-- that long, so a retry (its reply lost) answers the client the first run
-- unpinned, and does not unpin one that took the group since.
-- Returns the client it was pinned to, or ''.
local kept = kept_result('upr', ARGV[4])
if kept then return kept end
local client = redis.call('HGET', PINS, ARGV[3])
if client then unpin(ARGV[3], client) end
return keep_result('upr', ARGV[4], ARGV[5], client or '')
