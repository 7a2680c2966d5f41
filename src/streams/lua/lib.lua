-- lib.lua: the functions the general-stream scripts share, prepended to each by
-- redis-stream-store.ts (an EVAL script cannot include another). Forks (PROTOCOL.md §4.2) reach
-- keys of other streams than the script's KEYS (the source chain): every general-stream key shares
-- the hash tag of KEYS[4], so they live on one slot, also on a Cluster.
--
-- Meta hash fields beyond create.lua's: par (the parent's path, '' = no fork), fp (fork point:
-- positions up to it are the parent's), refs (living forks), gone ('1': soft-deleted), spec (the
-- fork PUT as given, for the idempotent compare), al (aliases: "epoch:upTo;..." of the ancestors),
-- own (whose share of maxStreamsPerOwner it counts against, '' = nobody's).
-- Keys of a stream that is a fork or has forks carry no Redis expiry: a fork's expiry must release
-- its parent's refs, and a parent's messages must outlive it while forks read them, so such
-- streams are expired by the scripts (on access, and by reap.lua over the index).
local LIB_INDEX = KEYS[4]
local LIB_PREFIX = string.sub(LIB_INDEX, 1, -7) -- '<prefix>:index' without ':index'

local function libNowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function libKeys(p)
  return LIB_PREFIX .. ':m:' .. p, LIB_PREFIX .. ':d:' .. p, LIB_PREFIX .. ':p:' .. p
end

-- An owner's live streams, scored by expiry like the index (maxStreamsPerOwner).
local function libOwnerIndex(owner)
  return LIB_PREFIX .. ':owner:' .. owner
end

-- The stream leaves its owner's count (removed, or soft-deleted).
local function libDisown(p, owner)
  if owner and owner ~= '' then redis.call('ZREM', libOwnerIndex(owner), p) end
end

-- Whether `owner` holds its share already. Expired entries no longer count and are dropped here (an
-- expired stream is dropped on its next access anyway; plain ones Redis expired leave only these).
local function libOwnerFull(owner, maxPerOwner, nowMs)
  if owner == '' or maxPerOwner <= 0 then return false end
  local key = libOwnerIndex(owner)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', nowMs)
  return redis.call('ZCARD', key) >= maxPerOwner
end

-- A plain stream (no fork, no forks) lets Redis expire its keys at its expiry; others none.
local function libSettleExpiry(p)
  local mk, dk, pk = libKeys(p)
  local f = redis.call('HMGET', mk, 'expms', 'par', 'refs')
  if (f[2] or '') == '' and tonumber(f[3] or '0') <= 0 and f[1] and f[1] ~= '' then
    redis.call('PEXPIREAT', mk, f[1])
    redis.call('PEXPIREAT', dk, f[1])
    redis.call('PEXPIREAT', pk, f[1])
  else
    redis.call('PERSIST', mk)
    redis.call('PERSIST', dk)
    redis.call('PERSIST', pk)
  end
end

-- Removes the stream's keys; its parent loses a fork, and a soft-deleted parent left without forks
-- goes too, up the chain.
local function libRemove(p)
  local mk, dk, pk = libKeys(p)
  local f = redis.call('HMGET', mk, 'par', 'own')
  local parent = f[1]
  libDisown(p, f[2])
  redis.call('DEL', mk, dk, pk)
  redis.call('ZREM', LIB_INDEX, p)
  while parent and parent ~= '' do
    local pm, pd, pp = libKeys(parent)
    if redis.call('EXISTS', pm) == 0 then return end
    local refs = redis.call('HINCRBY', pm, 'refs', -1)
    if refs > 0 then return end
    if redis.call('HGET', pm, 'gone') ~= '1' then
      libSettleExpiry(parent)
      return
    end
    local next = redis.call('HGET', pm, 'par')
    redis.call('DEL', pm, pd, pp)
    parent = next
  end
end

-- Delete or expiry: removed, or soft-deleted while forks read it. Returns true when removed.
local function libDrop(p)
  local mk = libKeys(p)
  local f = redis.call('HMGET', mk, 'refs', 'own')
  if tonumber(f[1] or '0') > 0 then
    redis.call('HSET', mk, 'gone', '1')
    -- A soft-deleted stream no longer counts towards maxStreams, nor its owner's share.
    redis.call('ZREM', LIB_INDEX, p)
    libDisown(p, f[2])
    return false
  end
  libRemove(p)
  return true
end

-- The stream's state on access: 'not_found', 'gone' or 'live'; an expired one is dropped here.
local function libState(p, nowMs)
  local mk = libKeys(p)
  local f = redis.call('HMGET', mk, 'ct', 'expms', 'gone')
  if not f[1] then return 'not_found' end
  if f[3] == '1' then return 'gone' end
  if f[2] and f[2] ~= '' and tonumber(f[2]) <= nowMs then
    return libDrop(p) and 'not_found' or 'gone'
  end
  return 'live'
end

-- Sliding Stream-TTL: every access but HEAD renews it (Stream-Expires-At stays fixed).
local function libTouch(p, nowMs)
  local mk = libKeys(p)
  local ttl = redis.call('HGET', mk, 'ttl')
  if not ttl or ttl == '' then return end
  local expms = string.format('%d', nowMs + tonumber(ttl) * 1000)
  redis.call('HSET', mk, 'expms', expms)
  redis.call('ZADD', LIB_INDEX, 'XX', expms, p)
  local owner = redis.call('HGET', mk, 'own')
  if owner and owner ~= '' then redis.call('ZADD', libOwnerIndex(owner), 'XX', expms, p) end
  libSettleExpiry(p)
end

-- Messages after `after` up to position `upTo` into `out`, the ancestors' first (a fork's stitched
-- read). At least one per read, however large. Returns the bytes so far, or nil once full.
-- The largest of list[from..]: a stream's `mx` meta field, its largest own message in bytes, lets a
-- reader size a plain XRANGE page (redis-stream-store.ts); a stream without it is read by read.lua.
local function libLargest(list, from)
  local largest = 0
  for i = from, #list do if #list[i] > largest then largest = #list[i] end end
  return largest
end

local function libCollect(p, after, upTo, out, max, maxBytes, bytes)
  local mk, dk = libKeys(p)
  local f = redis.call('HMGET', mk, 'fp', 'par')
  local fp = tonumber(f[1] or '0')
  if after < fp and f[2] and f[2] ~= '' then
    bytes = libCollect(f[2], after, math.min(upTo, fp), out, max, maxBytes, bytes)
    if bytes == nil then return nil end
    after = fp
  end
  local from = math.max(after, fp)
  if from >= upTo or #out >= max then return bytes end
  local entries = redis.call('XRANGE', dk, string.format('%d-0', from + 1), string.format('%d-0', upTo),
    'COUNT', max - #out)
  for _, entry in ipairs(entries) do
    local data = entry[2][2]
    if #out > 0 and bytes + #data > maxBytes then return nil end
    bytes = bytes + #data
    table.insert(out, data)
  end
  return bytes
end

-- ---------------------------------------------------------------------------------------------

-- Offsets' epochs start above the milliseconds since 2026-01-01T00:00:00Z, so a Redis that lost a
-- stream's meta still hands out offsets above any an earlier epoch did.
local LIB_ORIGIN_MS = 1767225600000

-- Every epoch this Redis hands out (create, fork, the fence) is above every one before it, of any
-- stream: a stream deleted and created again within one millisecond still starts a new epoch, so
-- (stream, epoch, position) names one message for ever (a replica's read cache relies on it,
-- message-cache.ts). `candidate` is the epoch the caller's own rule asks for.
local function libMintEpoch(candidate)
  local key = LIB_PREFIX .. ':epochs'
  local epoch = math.max(candidate, tonumber(redis.call('GET', key) or '-1') + 1)
  redis.call('SET', key, string.format('%d', epoch))
  return epoch
end

-- The fence: Redis holds less than this process handed out (a restart from an older snapshot, a
-- failover to a replica that lagged), or Redis restarted since the stream's last touch (which
-- cannot be told from a clean restart): a new epoch, so no offset ever names two positions. Returns
-- the stream's epoch, new or not.
local function libFenceEpoch(metaKey, dataKey, epoch, tail, lastRun, floorEpoch, floorTail, runId, nowMs)
  if floorEpoch > epoch or (floorEpoch == epoch and floorTail > tail) or (lastRun and lastRun ~= '' and lastRun ~= runId) then
    epoch = libMintEpoch(math.max(epoch + 1, floorEpoch + 1, nowMs - LIB_ORIGIN_MS))
    redis.call('HSET', metaKey, 'epoch', string.format('%d', epoch), 'rid', runId)
    -- Messages past the tail the meta records are not the stream's: dropped, and the stream's last id
    -- set back, so the next append's XADD at <tail + 1>-0 is accepted.
    for _, e in ipairs(redis.call('XRANGE', dataKey, string.format('(%d-0', tail), '+')) do
      redis.call('XDEL', dataKey, e[1])
    end
    if redis.call('EXISTS', dataKey) == 1 then redis.pcall('XSETID', dataKey, string.format('%d-0', tail)) end
  elseif lastRun ~= runId then
    redis.call('HSET', metaKey, 'rid', runId)
  end
  return epoch
end
