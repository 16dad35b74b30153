-- Retention cleanup, one bounded step: remove up to ARGV[5] messages that
-- retention no longer keeps, oldest first, each counted once in `removed`
-- and remembered like a deleted id; claimed messages are never touched
-- (they are not in FREE). Settles ended claims first, so a message whose
-- claim ended is judged like any other. With nothing to remove, the step
-- costs a few index reads (a rank, a count, the oldest free message),
-- however long the queue.
-- ARGV[3] retention time (ms, 0: none)  ARGV[4] retention length (0: none)
-- ARGV[5] batch                         ARGV[6] deleted-id memory (ms)
-- Returns {removed by retention, 1 if the batch was used up else 0}.
local batch = tonumber(ARGV[5])
use_retention(ARGV[3], ARGV[4])
local unsettled = refresh(batch)
local removed, more = trim(batch)
forget_buried(ARGV[6], batch)
return {removed, (more or unsettled) and 1 or 0}
