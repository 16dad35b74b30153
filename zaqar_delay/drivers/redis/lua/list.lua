-- Up to a page of messages after a position, reading at most BATCH ids.
-- ARGV[3] marker position ('' from the start)  ARGV[6] include delayed 1/0
-- ARGV[4] limit                                ARGV[7] echo 1/0
-- ARGV[5] include claimed 1/0                  ARGV[8] client UUID
-- ARGV[9] retention time (ms, 0: none)         ARGV[10] length (0: none)
-- ARGV[11] read-by-all cut ('' none, -1: nothing read by all yet)
-- ARGV[12] 1: when the client is a live persistent consumer of the
--          queue, list nothing and answer {NOW, '', {}, '', {its fields
--          as consumers.lua returns them}}: its listing is a consumer
--          page, which the caller builds
-- Messages retention no longer keeps are left out, and a backlog that
-- retention hides is not read: everything free before the position where
-- kept messages may start is not kept, so the page starts there, and
-- when claimed messages are wanted (a persistent consumer's page) the
-- claimed ones before it, which are kept, are found one by one by
-- bisection (next_held), a few index reads each.
-- With neither claimed nor delayed messages wanted, no groups (whose
-- blocked members are listed too but are not in avail) and nothing left
-- to settle (due messages or ended claims beyond this call's settling
-- batch, which avail does not hold yet), the page is read from avail,
-- which holds nothing else; otherwise from msgs, filtering
-- here, in growing chunks, until the page is full, the queue ends or BATCH
-- ids were read. In the last case the page may be short and the caller
-- asks again from the resume position for the rest, so each call is
-- bounded and the pages it assembles are full.
-- Returns {NOW, last position ('' if none), {message wire fields...},
-- resume position ('' when the page is full or the queue ended)}.
if ARGV[12] == '1' and ARGV[8] ~= '' then
  local f = redis.call('HMGET', conkey(ARGV[8]), 'c', 'h', 'l', 'a')
  if f[4] and consumer_live(ARGV[8]) then
    return {NOW, '', {}, '', {ARGV[8], f[1], f[2], f[3], f[4]}}
  end
end
local marker, limit = ARGV[3], tonumber(ARGV[4])
local with_claimed, with_delayed = ARGV[5] == '1', ARGV[6] == '1'
local echo, client = ARGV[7] == '1', ARGV[8]
use_retention(ARGV[9], ARGV[10], ARGV[11])

local source = MSGS
settle_for_retention()
if not with_claimed and not with_delayed then
  local unsettled = refresh(math.max(2 * limit, 20))
  if not unsettled and redis.call('ZCARD', GROUPS) == 0 then
    source = AVAIL
  end
end

-- Messages are read after position `after` (nil: from the start); below
-- `hidden_to` only the claimed ones.
local after = marker ~= '' and tonumber(marker) or nil
local hidden_to
local kept_from = visible_from()
if kept_from and (after == nil or after < kept_from) then
  if with_claimed then hidden_to = kept_from else after = kept_from - 1 end
end
local out, count, last, chunk = {}, 0, '', limit
local scanned, resume = 0, ''

while count < limit do
  if scanned >= BATCH then
    resume = score(after)
    break
  end
  local page = {}
  if hidden_to then
    page = next_held(after, hidden_to)
    if #page == 0 then after, hidden_to = hidden_to - 1, nil end
  end
  if not hidden_to then
    if after == math.huge then break end
    page = redis.call('ZRANGEBYSCORE', source,
                      after and '(' .. score(after) or '-inf', '+inf',
                      'WITHSCORES', 'LIMIT', 0,
                      math.min(chunk, BATCH - scanned))
    chunk = math.min(chunk * 2, 1000)
  end
  if #page == 0 then break end
  scanned = scanned + #page / 2
  for i = 1, #page, 2 do
    local id, pos = page[i], page[i + 1]
    after = tonumber(pos)
    local m = read(id)
    local wanted = m ~= nil
      and (with_delayed or m.due <= NOW)
      and (with_claimed or m.claim == '')
      and (echo or m.client ~= client)
      and kept(m)
    if wanted then
      emit(out, id, m)
      count = count + 1
      last = pos
      if count == limit then break end
    end
  end
end
return {NOW, last, out, resume}
