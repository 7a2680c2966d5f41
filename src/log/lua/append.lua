-- append.lua: mint offsets and append entries to one capsule's log in ONE atomic step, so two
-- writers can never produce a duplicate or a hole, and fence every regression of the store with a
-- new epoch. Called by redis-store.ts. Stands alone: lines shared with read.lua are
-- duplicated on purpose (an EVAL script cannot include another).
local logKey = KEYS[1] -- stream <prefix>:{capsule}:log, entry ids <offset>-0, field r = encodeEntry (record.ts)
local metaKey = KEYS[2] -- hash <prefix>:{capsule}:meta: epoch, offset (the counter), minted, fence
local dedupKey = KEYS[3] -- string <prefix>:{capsule}:w:<writerId> = "<seq>:<first>:<count>[:r]"
local writerId = ARGV[1] -- '' when the batch carries no BatchId
local seq = tonumber(ARGV[2])
local maxRecords = tonumber(ARGV[3]) -- count retention, 0 = unbounded
local floor = tonumber(ARGV[4]) -- highest offset this writer has seen durable here, 0 = none
local resetFact = ARGV[5] -- encoded store-reset fact, '' = the caller sent none
local dedupTtlMs = tonumber(ARGV[6])
local fence = ARGV[7] -- the ingesting owner's fencing token (src/fleet), '' = not fenced (submissions)
local maxBytes = tonumber(ARGV[8]) -- byte retention (Redis's estimate of the stream), 0 = unbounded
local missing = tonumber(ARGV[9]) -- frames-possibly-missing facts among the entries (for /capsules)
-- '1' on a connection's first append (redis-store.ts): only then can Redis have restarted since
-- this writer's last append (a restart drops the connection), so only then is the run id read.
local checkRun = ARGV[10] == '1'
local FIRST_ENTRY = 11 -- ARGV[11..] are the encoded entries, in order

-- Count retention rides on the XADD (its MAXLEN: trimmed after adding, as XTRIM did, one call less);
-- then bytes: when Redis's sampled estimate of the stream exceeds the bound, keep the newest share of
-- entries that fits (the newest entry always stays). The estimate (MEMORY USAGE, the costliest call
-- of an append) is taken once a sixteenth of the bound has been appended since the last one, not on
-- every append: the stream passes its bound by at most that much.
local function retainBytes(appendedBytes)
  if maxBytes <= 0 then return end
  if redis.call('HINCRBY', metaKey, 'unmeasured', appendedBytes) * 16 < maxBytes then return end
  redis.call('HSET', metaKey, 'unmeasured', 0)
  local usage = redis.call('MEMORY', 'USAGE', logKey, 'SAMPLES', 16) or 0
  if usage > maxBytes then
    local len = redis.call('XLEN', logKey)
    local keep = math.max(1, math.floor(len * maxBytes / usage))
    if keep < len then redis.call('XTRIM', logKey, 'MAXLEN', '=', keep) end
  end
end

-- XADD at an explicit offset (`trim`: with count retention). pcall: Redis refuses an id at or below
-- the stream's last generated one, the witness of a counter that fell below the stream; the caller
-- decides what that means. Every redis.call costs a few microseconds of its own beyond the command,
-- so an append makes as few as it can: this check replaced an XREVRANGE and an EXISTS per append.
local function xadd(offset, entry, trim)
  local id = string.format('%d-0', offset)
  if trim and maxRecords > 0 then
    return redis.pcall('XADD', logKey, 'MAXLEN', '=', maxRecords, id, 'r', entry)
  end
  return redis.pcall('XADD', logKey, id, 'r', entry)
end

-- 2026-01-01T00:00:00Z in seconds. A new epoch's offsets start above the microseconds elapsed since
-- then, so even a Redis that lost everything while the gateway restarted (no floor known) never
-- hands out an offset below one an earlier epoch handed out (at most one offset per microsecond).
-- Read only when a new epoch starts, its only use (TIME on every append was a tenth of the script).
local TIME_FLOOR_ORIGIN = 1767225600

-- Already applied (a retry after a lost reply)? Answer as then, reset included, append nothing.
if writerId ~= '' then
  local last = redis.call('GET', dedupKey)
  if last then
    local lastSeq, first, count, flag = string.match(last, '^(%d+):(%d+):(%d+):?(%a*)$')
    if lastSeq and tonumber(lastSeq) >= seq then
      local epochNow = redis.call('HGET', metaKey, 'epoch') or '0'
      return { epochNow, flag == 'r' and 2 or 0, tonumber(first), tonumber(count) }
    end
  end
end

-- One read of the meta hash for the fence and the counter (they were two calls).
local meta = redis.call('HMGET', metaKey, 'epoch', 'offset', 'minted', 'rid', 'fence')
local epoch, counter, minted, lastRun = meta[1], tonumber(meta[2] or '0'), meta[3], meta[4]

-- Fenced: a batch stamped with a token older than the capsule's current one comes from a
-- replica that lost its lease (paused, partitioned) after another took over: refused, nothing written.
-- After the dedup check on purpose: a retry of a batch applied while its token was current is answered.
if fence ~= '' then
  local current = tonumber(meta[5] or '0')
  if tonumber(fence) < current then
    return redis.error_reply('FENCED token ' .. fence .. ' is older than ' .. string.format('%d', current))
  end
end

-- The per-writer dedup fields once lived in the meta hash (one more per gateway restart, never
-- pruned): drop them when seen. Only older gateways wrote them, so a connection's first append
-- (checkRun) looks: a gateway upgraded from one meets them there. HLEN is O(1); only a legacy
-- hash pays for HKEYS. Current fields: epoch, offset, and when present minted (briefly), fence
-- (src/fleet), rid, missing, unmeasured.
if checkRun then
  local known = 2 + redis.call('HEXISTS', metaKey, 'minted') + redis.call('HEXISTS', metaKey, 'fence')
    + redis.call('HEXISTS', metaKey, 'rid') + redis.call('HEXISTS', metaKey, 'missing')
    + redis.call('HEXISTS', metaKey, 'unmeasured')
  if redis.call('HLEN', metaKey) > known then
    for _, field in ipairs(redis.call('HKEYS', metaKey)) do
      if string.sub(field, 1, 2) == 'w:' then redis.call('HDEL', metaKey, field) end
    end
  end
end

-- This Redis process's run id: it changes on every restart and differs on a promoted replica. Read
-- only when checkRun: INFO builds a kilobyte reply that the script then scans, the costliest part
-- of an append when it ran every time.
local runId = checkRun and (string.match(redis.call('INFO', 'server'), 'run_id:(%w+)') or '') or nil
if runId and lastRun ~= runId then redis.call('HSET', metaKey, 'rid', runId) end

local count = #ARGV - FIRST_ENTRY + 1

-- A regression: the meta key is gone (or only a reader minted its epoch) while the log has a past,
-- or the counter is below what this writer saw durable or below the stream's last entry. That last
-- witness is the first XADD itself (below): Redis refuses an id at or below the stream's last one.
local fresh = (not epoch) or minted
local regressed
if fresh then
  regressed = floor > 0 or redis.call('EXISTS', logKey) == 1
else
  regressed = counter < floor
  -- A writer that knows nothing of this log yet (floor 0: a gateway that also restarted, or a new
  -- owner) cannot compare. If Redis itself restarted (or failed over) since the last append, it may
  -- have come back from an older snapshot: fence it, conservatively, rather than re-use offsets.
  if not regressed and floor == 0 and runId and lastRun and lastRun ~= runId then regressed = true end
end

-- The steady path: nothing regressed as far as the meta hash tells; the first entry's XADD checks
-- the stream. Refused means the counter fell below the stream (a partial rollback): a new epoch.
local steady = not (fresh or regressed)
local firstAdded = false
if steady and count > 0 then
  local added = xadd(counter + 1, ARGV[FIRST_ENTRY], count == 1)
  if type(added) == 'table' and added.err then
    if not string.find(added.err, 'equal or smaller', 1, true) then return added end
    regressed, steady = true, false
  else
    firstAdded = true
  end
end

if not steady then
  local t = redis.call('TIME')
  local nowSec, nowUsec = tonumber(t[1]), tonumber(t[2])
  local timeFloor = math.max(0, (nowSec - TIME_FLOOR_ORIGIN) * 1000000 + nowUsec)
  -- Offsets of the new epoch start above everything any reader may hold: the writer's floor, the
  -- stream's last generated id (entries since trimmed included), the old counter, the time floor.
  local lastGenerated = 0
  if redis.call('EXISTS', logKey) == 1 then
    local info = redis.call('XINFO', 'STREAM', logKey)
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' then
        lastGenerated = tonumber(string.match(info[i + 1], '^(%d+)'))
      end
    end
  end
  local base = math.max(floor, lastGenerated, counter)
  -- A reader-minted epoch with no past already starts at its own time floor: keep its counter.
  if regressed or not minted then base = math.max(base, timeFloor) end
  if not minted then
    -- Microseconds (16 digits, < 10^16), never the epoch it replaces. A reader-minted epoch (no
    -- record yet) is kept: readers already saw it, with no record under it.
    local newEpoch = nowSec .. string.format('%06d', nowUsec)
    if newEpoch == epoch then newEpoch = tostring(tonumber(newEpoch) + 1) end
    epoch = newEpoch
  end
  -- Old records that survived stay: they are still true. Only the epoch and counter move.
  redis.call('HSET', metaKey, 'epoch', epoch, 'offset', string.format('%d', base))
  redis.call('HDEL', metaKey, 'minted')
  counter = base
  if regressed and resetFact ~= '' then
    -- The new epoch's first record is the loss fact, and nothing else: the writer re-sends what
    -- still belongs after it (a reader resuming from any old cursor meets this signal first).
    local offset = base + 1
    redis.call('HSET', metaKey, 'offset', string.format('%d', offset))
    local added = xadd(offset, resetFact, true)
    if type(added) == 'table' and added.err then return added end
    redis.call('HINCRBY', metaKey, 'missing', 1) -- the reset fact says frames may be missing
    retainBytes(#resetFact)
    if writerId ~= '' then
      redis.call('SET', dedupKey, string.format('%d:%d:1:r', seq, offset), 'PX', dedupTtlMs)
    end
    return { epoch, 2, offset, 1 }
  end
end

-- The entries at counter + 1 ...: the meta hash's counter moves with them, in this same script.
local appendedBytes = 0
for i = 0, count - 1 do
  local entry = ARGV[FIRST_ENTRY + i]
  if i > 0 or not firstAdded then
    local added = xadd(counter + i + 1, entry, i == count - 1)
    -- Only a new epoch's base could meet this (it starts above the stream's last id): never expected.
    if type(added) == 'table' and added.err then return added end
  end
  appendedBytes = appendedBytes + #entry
end
redis.call('HSET', metaKey, 'offset', string.format('%d', counter + count))
if missing > 0 then redis.call('HINCRBY', metaKey, 'missing', missing) end
retainBytes(appendedBytes)
if writerId ~= '' then
  -- Its own key with a TTL: a writer that is gone (a gateway restart) leaves nothing behind.
  redis.call('SET', dedupKey, string.format('%d:%d:%d', seq, counter + 1, count), 'PX', dedupTtlMs)
end
return { epoch, 1, counter + 1, count }
