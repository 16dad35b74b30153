-- The oldest (ARGV[3] = "1") or newest ("-1") due message.
-- Returns {NOW, {message wire fields}} (empty list if there is none).
local out = {}
local id, m = first_live(tonumber(ARGV[3]), true)
if id then emit(out, id, m) end
return {NOW, out}
