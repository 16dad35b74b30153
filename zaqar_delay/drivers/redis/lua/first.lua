-- The oldest (ARGV[3] = "1") or newest ("-1") due message.
-- Returns {NOW, {message wire fields}} (empty list if there is none).
local out = {}
local id, m = first_due(tonumber(ARGV[3]))
if id then emit(out, id, m) end
return {NOW, out}
