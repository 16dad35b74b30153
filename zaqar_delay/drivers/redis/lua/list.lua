-- One full page of messages after a position.
-- ARGV[3] marker position ('' from the start)  ARGV[6] include delayed 1/0
-- ARGV[4] limit                                ARGV[7] echo 1/0
-- ARGV[5] include claimed 1/0                  ARGV[8] client UUID
-- With neither claimed nor delayed messages wanted, and no groups (whose
-- blocked members are listed too but are not in avail), the page is read
-- from avail, which holds nothing else; otherwise from msgs, filtering
-- here, in growing chunks, until the page is full or the queue ends.
-- Returns {NOW, last position ('' if none), {message wire fields...}}.
local marker, limit = ARGV[3], tonumber(ARGV[4])
local with_claimed, with_delayed = ARGV[5] == '1', ARGV[6] == '1'
local echo, client = ARGV[7] == '1', ARGV[8]

local source = MSGS
if not with_claimed and not with_delayed then
  refresh()
  if redis.call('ZCARD', GROUPS) == 0 then source = AVAIL end
end

local from = '-inf'
if marker ~= '' then from = '(' .. marker end
local out, count, last, chunk = {}, 0, '', limit

while count < limit do
  local page = redis.call('ZRANGEBYSCORE', source, from, '+inf',
                          'WITHSCORES', 'LIMIT', 0, chunk)
  if #page == 0 then break end
  for i = 1, #page, 2 do
    local id, pos = page[i], page[i + 1]
    from = '(' .. pos
    local m = read(id)
    local wanted = m ~= nil
      and (with_delayed or m.due <= NOW)
      and (with_claimed or m.claim == '')
      and (echo or m.client ~= client)
    if wanted then
      emit(out, id, m)
      count = count + 1
      last = pos
      if count == limit then break end
    end
  end
  chunk = math.min(chunk * 2, 1000)
end
return {NOW, last, out}
