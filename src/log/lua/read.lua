-- read.lua: records after an offset plus the log's position, read in one atomic step so the page
-- and the head/first/epoch it is reported with always agree. Called by redis-store.ts. Stands
-- alone: the epoch minting below duplicates append.lua's on purpose.
local logKey = KEYS[1] -- stream <prefix>:{capsule}:log
local metaKey = KEYS[2] -- hash <prefix>:{capsule}:meta
local after = tonumber(ARGV[1]) -- exclusive
local limit = tonumber(ARGV[2]) -- 0 = position only

local epoch = redis.call('HGET', metaKey, 'epoch')
if not epoch then
  -- No epoch: a new log, or its meta key was lost. Mint the generation here too (so a reader never
  -- sees an epoch the next append would replace), with the same offset rules as append.lua: above
  -- the stream's last generated id and the time floor. Records that survived are kept. `minted`
  -- tells append.lua no record has been written under this epoch yet: if the log had a past, the
  -- next append writes the store-reset fact first.
  local t = redis.call('TIME')
  local nowSec, nowUsec = tonumber(t[1]), tonumber(t[2])
  local timeFloor = math.max(0, (nowSec - 1767225600) * 1000000 + nowUsec) -- µs since 2026-01-01Z
  local lastGenerated = 0
  if redis.call('EXISTS', logKey) == 1 then
    local info = redis.call('XINFO', 'STREAM', logKey)
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' then
        lastGenerated = tonumber(string.match(info[i + 1], '^(%d+)'))
      end
    end
  end
  -- Microseconds (16 digits, < 10^16).
  epoch = nowSec .. string.format('%06d', nowUsec)
  local base = math.max(lastGenerated, timeFloor)
  redis.call('HSET', metaKey, 'epoch', epoch, 'offset', string.format('%d', base), 'minted', '1')
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
