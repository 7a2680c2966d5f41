-- read.lua: records after an offset plus the log's position, read in one atomic step so the page
-- and the head/first/epoch it is reported with always agree. Called by redis-store.ts.
local logKey = KEYS[1] -- stream mg:{capsule}:log
local metaKey = KEYS[2] -- hash mg:{capsule}:meta
local after = tonumber(ARGV[1]) -- exclusive
local limit = tonumber(ARGV[2]) -- 0 = position only

local epoch = redis.call('HGET', metaKey, 'epoch')
if not epoch then
  -- Same rule as append.lua: no epoch means a new or lost log; mint the generation here too so a
  -- reader never sees an epoch that the next append would replace.
  redis.call('DEL', logKey, metaKey)
  local t = redis.call('TIME')
  -- Microseconds (16 digits, < 10^16): a log lost and re-created within the same millisecond
  -- still gets a different epoch.
  epoch = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('HSET', metaKey, 'epoch', epoch, 'offset', 0)
end

local head = redis.call('HGET', metaKey, 'offset') or '0'
local firstEntry = redis.call('XRANGE', logKey, '-', '+', 'COUNT', 1)
local first = false
if firstEntry[1] then first = firstEntry[1][1] end
local records = {}
if limit > 0 then
  records = redis.call('XRANGE', logKey, string.format('%d-0', after + 1), '+', 'COUNT', limit)
end
return { epoch, head, first, records }
