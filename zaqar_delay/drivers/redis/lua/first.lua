-- The oldest (ARGV[3] = "1") or newest ("-1") due message that retention
-- keeps. ARGV[4] retention time (ms, 0: none), ARGV[5] length (0: none),
-- ARGV[6] read-by-all cut ('' none, -1: nothing read by all yet).
-- Returns {NOW, {message wire fields}} (empty list if there is none).
use_retention(ARGV[4], ARGV[5], ARGV[6])
settle_for_retention()
local out = {}
local id, m = first_live(tonumber(ARGV[3]), true)
if id then emit(out, id, m) end
return {NOW, out}
