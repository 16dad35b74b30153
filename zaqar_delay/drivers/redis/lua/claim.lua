-- Claim (or pop) up to `limit` due, unclaimed messages in position order,
-- at most one per group.
-- ARGV[3] claim id          ARGV[7] max claim count (0: unlimited)
-- ARGV[4] claim ttl (s)     ARGV[8] dead-letter queue name ('' for none)
-- ARGV[5] grace (s)         ARGV[9] redelivery delay (s)
-- ARGV[6] limit             ARGV[10] "claim" or "pop"
-- ARGV[11] dead-letter ttl (s), '' to keep each message's own ttl
-- ARGV[12] retry span (ms): how long a non-empty result is kept under
--          Q:r:<claim id>, so that a retry of this call (same claim id,
--          after a lost reply) returns the same batch instead of another
-- ARGV[13] deleted-id memory (ms): popped ids are remembered this long
-- ARGV[14] retention time (ms, 0: none)  ARGV[15] retention length (0: none)
-- ARGV[16] read-by-all cut ('' none, -1: nothing read by all yet)
-- ARGV[17] client ('' when the queue is not sticky, or for Zaqar's purge)
-- ARGV[18] sticky time (ms, 0: not sticky)
-- Sticky queues: the client's own pinned heads (pinned_avail) and avail
-- are read together in position order; a head taken from avail pins its
-- group to the client. Heads pinned to other clients are in neither.
-- A message already claimed max-claim-count times is not handed out: it
-- goes to the outbox for the caller to copy into the dead-letter queue, or
-- is dropped without one; either way its group's next member is unblocked.
-- Its work is bounded by the limit, so a claim costs about the same
-- whatever backlog the queue holds: it settles twice what it can hand out
-- (a backlog of due messages or ended claims drains faster than it is
-- consumed) and looks at no more than twice `limit` claimable ids,
-- dropping the expired ones among them (BATCH more when those run out
-- before `limit` were handed out); gc removes the other expired
-- messages.
-- Retention: it hands out only from the position where kept messages
-- start, so a backlog that retention hides costs it nothing (the cleanup
-- daemon removes it). On a queue with groups it first removes up to
-- `limit` of the oldest messages retention no longer keeps; when it then
-- comes back short, it removes up to BATCH of the hidden heads and the
-- dropped members behind them (clear_hidden_heads) and looks again, so a
-- group whose head is no longer kept moves on to its next kept member.
-- Returns {NOW, {message wire fields...}, {outbox ids...}, more}: more
-- is 1 when it stopped at a bound with ids left to look at.
local cid, ttl, grace = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local limit, max_claims = tonumber(ARGV[6]), tonumber(ARGV[7])
local dlq, redelivery, pop = ARGV[8], ARGV[9], ARGV[10] == 'pop'
local dlq_ttl = ARGV[11]
local result_key = Q .. ':r:' .. cid

local kept = redis.call('GET', result_key)
if kept then
  kept = cmsgpack.unpack(kept)
  -- A claim's batch is its caller's only while the claim lasts. A retry
  -- that comes after the claim ended (its reply lost, Redis away) hands
  -- out nothing: the messages are claimable again or dead letters, and a
  -- caller that got them would delete what it no longer holds (a dead
  -- letter already moved is "already deleted", its copy handed out again).
  local ends = not pop and redis.call('HGET', ckey(cid), 'e')
  if not pop and not (ends and tonumber(ends) > NOW) then
    return {NOW, {}, kept[3]}
  end
  return kept
end

use_retention(ARGV[14], ARGV[15], ARGV[16])
-- Under `length`, every ended claim not settled yet counts as newer than
-- each free message (hide_below): a batch of them is settled first, as
-- reads do, and a backlog left over makes an empty answer "more", never
-- an empty queue (Zaqar's purge pops on).
local unsettled = refresh(RET_LENGTH > 0 and math.max(2 * limit, BATCH)
                          or 2 * limit) and RET_LENGTH > 0
if redis.call('EXISTS', GROUPS) == 1 then trim(limit) end
local from = visible_from()
-- (Both absent: a caller that predates sticky groups.)
local client = ARGV[17] or ''
local mine, unswept = sticky_claim(client, tonumber(ARGV[18] or 0), limit)

-- The first claimable id of `index` at or after `from`: {id, position}.
local function peek(index)
  if from then
    return redis.call('ZRANGEBYSCORE', index, score(from), '+inf',
                      'WITHSCORES', 'LIMIT', 0, 1)
  end
  return redis.call('ZRANGE', index, 0, 0, 'WITHSCORES')
end

-- Take the next candidate, the lower position of avail and the client's
-- own pinned heads: {id, position, index it came from}, or {}.
local function next_candidate()
  if not mine and not from then
    local popped = redis.call('ZPOPMIN', AVAIL)
    if popped[1] then popped[3] = AVAIL end
    return popped
  end
  local found, index = peek(AVAIL), AVAIL
  if mine then
    local own = peek(mine)
    if own[1] and (not found[1] or tonumber(own[2]) < tonumber(found[2])) then
      found, index = own, mine
    end
  end
  if found[1] then
    redis.call('ZREM', index, found[1])
    found[3] = index
  end
  return found
end

local claim_expires = NOW + ttl * 1000
local keep_until = claim_expires + grace * 1000
local out, dead, count = {}, {}, 0
-- Index changes of the claimed messages, sent once after the loop (one
-- ZADD or ZREM per index, not one per message): no other step of the
-- loop touches these ids' entries.
local by_claim_expiry, by_expiry, by_position, unfree = {}, {}, {}, {}
-- A pop deletes a group's head, which files the next member at once; it is
-- set aside here so that one call hands out one message per group.
local popped_groups, set_aside = {}, {}

local function take(budget)
  -- Expired (or gone) messages in no group met on the way: dropped
  -- together once the loop ends (drop_all); none is met twice, as each
  -- was taken out of the index it came from.
  local gone, gone_fields = {}, {}
  while count < limit and budget > 0 do
    budget = budget - 1
    local popped = next_candidate()
    if #popped == 0 then break end
    local id = popped[1]
    local m, f = read(id)
    if not m and f[11] then
      drop(id, {f[11], f[7]})
    elseif not m then
      gone[#gone + 1], gone_fields[#gone_fields + 1] = id, {f[11], f[7]}
    elseif m.due > NOW then
      -- Not due: a head filed for its expiry (place), met live because
      -- Redis's clock stepped back since. Never handed out early.
      place(id, m.due, tonumber(m.pos), m.group, m.expires)
    elseif too_old(m.created) then
      -- Kept by length (at or after `from`), but past `time`: only possible
      -- if the clock went back between posts; it is gone all the same.
      retire(id)
    elseif popped_groups[m.group] then
      set_aside[#set_aside + 1] = popped
    elseif max_claims > 0 and tonumber(m.cc) >= max_claims then
      if dlq ~= '' then
        to_outbox(id, m.pos, dlq, dlq_ttl ~= '' and dlq_ttl or m.ttl, 0)
        dead[#dead + 1] = id
      else
        drop(id)
        bury(id)
      end
    else
      count = count + 1
      if mine and m.group ~= '' and popped[3] == AVAIL then
        pin(m.group, client)
      end
      if pop then
        emit(out, id, m)
        if m.group ~= '' then popped_groups[m.group] = true end
        drop(id)
        bury(id)
      else
        m.cc = tonumber(m.cc) + 1
        m.claim = cid
        local fields = {'c', cid, 'ce', claim_expires, 'cc', m.cc,
                        'rd', redelivery}
        local expires = kept_alive(m, keep_until, ttl + grace, fields)
        redis.call('HSET', mkey(id), unpack(fields))
        if expires then
          by_expiry[#by_expiry + 1], by_expiry[#by_expiry + 2] = expires, id
        end
        local n = #by_claim_expiry
        by_claim_expiry[n + 1], by_claim_expiry[n + 2] = claim_expires, id
        by_position[n + 1], by_position[n + 2] = m.pos, id
        unfree[#unfree + 1] = id
        emit(out, id, m)
      end
    end
  end
  drop_all(gone, gone_fields)
  return budget
end

-- Expired messages and dead letters met on the way use up the budget:
-- one that runs out short looks at BATCH more, so that a run of them
-- ahead of a live message does not answer empty (read as an empty
-- queue) until gc has removed it.
local left = take(2 * limit)
if left == 0 and count < limit then left = take(BATCH) end
local hidden = 0
if count < limit and from and redis.call('EXISTS', GROUPS) == 1 then
  hidden = clear_hidden_heads(from, BATCH, mine)
  if hidden > 0 then left = take(2 * limit) end
end
-- Stopped at a bound of its work with more to look at: an empty answer
-- is then not an empty queue (Zaqar's purge pops on; claims.take).
local more = count < limit
  and (left == 0 or hidden >= BATCH or unswept or unsettled)
send_all('ZADD', EXPIRY, by_expiry)
send_all('ZADD', CLAIMED, by_claim_expiry)
send_all('ZADD', cmkey(cid), by_position)
send_all('ZREM', FREE, unfree)
for _, entry in ipairs(set_aside) do
  redis.call('ZADD', entry[3], entry[2], entry[1])
end

if count > 0 and not pop then
  redis.call('HSET', ckey(cid), 't', ttl, 'e', claim_expires, 'g', grace)
  redis.call('PEXPIREAT', ckey(cid), claim_expires)
  redis.call('PEXPIREAT', cmkey(cid), claim_expires)
  redis.call('ZADD', CLAIMS, claim_expires, cid)
  for i = 1, #out, WIRE_FIELDS do
    if out[i + WIRE_GROUP - 1] ~= '' then
      redis.call('ZADD', GFLIGHT, claim_expires, out[i])
    end
  end
end
forget_buried(ARGV[13], 2 * count + 10)
local result = {NOW, out, dead, more and 1 or 0}
-- An empty result is not kept: a retry that then finds messages hands
-- them out once, which is still the effect of one call.
if #out > 0 or #dead > 0 then
  redis.call('SET', result_key, cmsgpack.pack(result), 'PX', ARGV[12])
end
return result
