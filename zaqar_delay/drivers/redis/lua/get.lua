-- Live messages by id (delayed ones included: the poster knows the id)
-- that retention keeps.
-- ARGV[3] retention time (ms, 0: none)  ARGV[4] retention length (0: none)
-- ARGV[5] read-by-all cut ('' none, -1: nothing read by all yet)
-- ARGV[6..] message ids.
-- Returns {NOW, {message wire fields...}} in the order asked.
use_retention(ARGV[3], ARGV[4], ARGV[5])
settle_for_retention()
local out = {}
for i = 6, #ARGV do
  local m = read(ARGV[i])
  if m and kept(m) then emit(out, ARGV[i], m) end
end
return {NOW, out}
