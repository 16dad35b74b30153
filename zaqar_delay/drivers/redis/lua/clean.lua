-- Retention cleanup, one bounded step: remove up to ARGV[6] messages that
-- retention no longer keeps, oldest first, each counted once in `removed`
-- and remembered like a deleted id (forgetting as many old deleted ids,
-- so that memory keeps pace); claimed messages are never touched (they
-- are not in FREE). A message whose claim ended joins FREE when the claim
-- is settled (gc settles each queue before it cleans it), and is judged
-- like any other from then. With nothing to remove, the step costs a few
-- index reads (a rank, a count, the oldest free message), however long
-- the queue.
-- ARGV[3] retention time (ms, 0: none)  ARGV[4] retention length (0: none)
-- ARGV[5] read-by-all cut ('' none, -1: nothing read by all yet)
-- ARGV[6] batch                         ARGV[7] deleted-id memory (ms)
-- Returns {removed by retention, 1 if the batch was used up else 0}.
local batch = tonumber(ARGV[6])
use_retention(ARGV[3], ARGV[4], ARGV[5])
local removed, more = trim(batch)
forget_buried(ARGV[7], batch)
return {removed, more and 1 or 0}
