-- append.lua: mint offsets and append entries to one capsule's log in ONE atomic step, so two
-- writers can never produce a duplicate or a hole (issue 2, "The log"). Called by redis-store.ts.
local logKey = KEYS[1] -- stream mg:{capsule}:log, entry ids <offset>-0, field r = encoded entry
local metaKey = KEYS[2] -- hash mg:{capsule}:meta: epoch, offset, w:<writerId> = "<seq>:<first>:<count>"
local writerId = ARGV[1] -- '' when the batch carries no BatchId
local seq = tonumber(ARGV[2])
local maxRecords = tonumber(ARGV[3]) -- count retention, 0 = unbounded
local FIRST_ENTRY = 4 -- ARGV[4..] are the encoded entries, in order

local epoch = redis.call('HGET', metaKey, 'epoch')
if not epoch then
  -- No epoch: the log is new or was lost. Start a new generation from a clean slate so offsets
  -- restart at 1 and no stale entry can collide with a new id.
  redis.call('DEL', logKey, metaKey)
  local t = redis.call('TIME')
  -- Microseconds (16 digits, < 10^16): a log lost and re-created within the same millisecond
  -- still gets a different epoch.
  epoch = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('HSET', metaKey, 'epoch', epoch, 'offset', 0)
end

if writerId ~= '' then
  local last = redis.call('HGET', metaKey, 'w:' .. writerId)
  if last then
    local lastSeq, first, count = string.match(last, '^(%d+):(%d+):(%d+)$')
    if tonumber(lastSeq) >= seq then
      -- Already applied (a retry after a lost reply): append nothing, say where it landed then.
      return { epoch, 0, tonumber(first), tonumber(count) }
    end
  end
end

local count = #ARGV - FIRST_ENTRY + 1
local base = redis.call('HINCRBY', metaKey, 'offset', count) - count
for i = 0, count - 1 do
  redis.call('XADD', logKey, string.format('%d-0', base + i + 1), 'r', ARGV[FIRST_ENTRY + i])
end
if maxRecords > 0 then
  redis.call('XTRIM', logKey, 'MAXLEN', '=', maxRecords)
end
if writerId ~= '' then
  redis.call('HSET', metaKey, 'w:' .. writerId, string.format('%d:%d:%d', seq, base + 1, count))
end
return { epoch, 1, base + 1, count }
