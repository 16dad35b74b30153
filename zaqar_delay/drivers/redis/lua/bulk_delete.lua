-- Delete several messages at once.
-- ARGV[3] deleted-id memory (ms): deleted ids are remembered this long
-- ARGV[4] client deleting ('' when unknown; keeps a sticky client active)
-- ARGV[5] n, the number of claim ids that follow (0: claims not checked)
-- ARGV[6 .. 5+n] claim ids; ARGV[6+n ..] message ids
-- With claim ids, every claimed message must be under one of them, else
-- nothing is deleted. Returns {0} or {1, offending message id}.
local n = tonumber(ARGV[5])
local allowed = {}
for i = 6, 5 + n do allowed[ARGV[i]] = true end
if n > 0 then
  for i = 6 + n, #ARGV do
    local m = read(ARGV[i])
    if m and m.claim ~= '' and not allowed[m.claim] then
      return {1, ARGV[i]}
    end
  end
end
local deleted = 0
for i = 6 + n, #ARGV do
  local m = read(ARGV[i])
  if m and m.claim ~= '' then redis.call('ZREM', cmkey(m.claim), ARGV[i]) end
  drop(ARGV[i])
  if m then
    bury(ARGV[i])
    deleted = deleted + 1
  end
end
forget_buried(ARGV[3], 2 * deleted + 10)
touch(ARGV[4])
return {0}
