-- Delete several messages at once.
-- ARGV[3] n, the number of claim ids that follow (0: claims not checked)
-- ARGV[4 .. 3+n] claim ids; ARGV[4+n ..] message ids
-- With claim ids, every claimed message must be under one of them, else
-- nothing is deleted. Returns {0} or {1, offending message id}.
local n = tonumber(ARGV[3])
local allowed = {}
for i = 4, 3 + n do allowed[ARGV[i]] = true end
if n > 0 then
  for i = 4 + n, #ARGV do
    local m = read(ARGV[i])
    if m and m.claim ~= '' and not allowed[m.claim] then
      return {1, ARGV[i]}
    end
  end
end
for i = 4 + n, #ARGV do
  local m = read(ARGV[i])
  if m and m.claim ~= '' then redis.call('ZREM', cmkey(m.claim), ARGV[i]) end
  drop(ARGV[i])
end
return {0}
