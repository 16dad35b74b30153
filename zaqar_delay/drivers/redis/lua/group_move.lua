-- Take one group out of this queue, in order, into the outbox bound for
-- another queue; the caller copies it there and then forgets the entries.
-- ARGV[3] group id (JSON-encoded)   ARGV[4] target queue name
-- Each message keeps its remaining ttl and remaining delay.
-- Returns {0, ids in order}, or {1} if the group's head is claimed (moving
-- it would hand it out twice) and nothing was moved.
local group, target = ARGV[3], ARGV[4]
local ids = redis.call('ZRANGE', gkey(group), 0, -1)
if #ids == 0 then return {0, {}} end
local head = read(ids[1])
if head and head.claim ~= '' then return {1} end
local moved = {}
for _, id in ipairs(ids) do
  local m = read(id)
  if m then
    local ttl = math.ceil((m.expires - NOW) / 1000)
    local delay = math.max(0, math.ceil((m.due - NOW) / 1000))
    to_outbox(id, m.pos, target, ttl, delay)
    moved[#moved + 1] = id
  else
    drop(id)
  end
end
return {0, moved}
