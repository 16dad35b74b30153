-- Read the queue's metadata copy and its generation (metadata.py), with
-- how long (ms) the two can be kept by a process: until the first of
-- them expires, when a change or an expiry could bring back an old
-- generation. The copy is '' when missing, the generation '' when none.
local copy = redis.call('GET', Q .. ':meta')
if not copy then return {'', redis.call('GET', Q .. ':metagen') or '', 0} end
local lasts = redis.call('PTTL', Q .. ':meta')
local gen = redis.call('GET', Q .. ':metagen')
if gen then
  local gen_lasts = redis.call('PTTL', Q .. ':metagen')
  if gen_lasts >= 0 and gen_lasts < lasts then lasts = gen_lasts end
end
return {copy, gen or '', lasts}
