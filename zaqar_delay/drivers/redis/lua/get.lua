-- Live messages by id (delayed ones included: the poster knows the id).
-- ARGV[3..] message ids.
-- Returns {NOW, {message wire fields...}} in the order asked.
local out = {}
for i = 3, #ARGV do
  local m = read(ARGV[i])
  if m then emit(out, ARGV[i], m) end
end
return {NOW, out}
