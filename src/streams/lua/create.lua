-- create.lua: PUT of a general stream (PROTOCOL.md §5.1) in ONE atomic step: the idempotent
-- compare with an existing stream, the stream-count bound, the meta hash, the initial messages and
-- the expiry, or nothing at all. Called by redis-stream-store.ts; lib.lua is prepended. fork.lua
-- creates forks.
local metaKey = KEYS[1] -- hash: ct, ttl, exp, expms, closed, epoch, tail, sseq, rid, cby (+ lib.lua's)
local dataKey = KEYS[2] -- stream of messages, entry id <position>-0 (1-based), field d
local producersKey = KEYS[3] -- hash: producer id -> "<epoch>:<lastSeq>"
local indexKey = KEYS[4] -- sorted set of every live stream's path, scored by its expiry in ms (inf: none)
local path = ARGV[1]
local contentType = ARGV[2]
local ttl = ARGV[3] -- '' = none
local expiresAt = ARGV[4] -- '' = none (as the client wrote it)
local ttlMs = ARGV[5] -- '' = no relative expiry
local expiresAtMs = ARGV[6] -- '' = no absolute expiry
local closed = ARGV[7] -- '1' | '0'
local maxStreams = tonumber(ARGV[8])
local floorEpoch = tonumber(ARGV[9]) -- the highest epoch this process saw for the path, -1 = none
local runId = ARGV[10]
local owner = ARGV[11] -- whose share of maxStreamsPerOwner the stream counts against ('' = nobody's)
local maxPerOwner = tonumber(ARGV[12]) -- 0 = no share
local FIRST_ENTRY = 13

local nowMs = libNowMs()

local state = libState(path, nowMs)
if state == 'gone' then return { 'gone' } end
if state == 'live' then
  local existing = redis.call('HMGET', metaKey, 'ct', 'ttl', 'exp', 'expms', 'closed', 'epoch', 'tail', 'al')
  local same = existing[1] == contentType and (existing[2] or '') == ttl and (existing[3] or '') == expiresAt
    and (existing[5] or '0') == closed
  return { same and 'exists' or 'conflict', existing[1], existing[2] or '', existing[3] or '', existing[4] or '',
    existing[5] or '0', existing[6] or '0', existing[7] or '0', '0', existing[8] or '' }
end

-- Expired streams leave the count: a few reaped here, the rest not counted (reap.lua takes them).
for _, p in ipairs(redis.call('ZRANGEBYSCORE', indexKey, '-inf', nowMs, 'LIMIT', 0, 16)) do
  if libState(p, nowMs) == 'not_found' then redis.call('ZREM', indexKey, p) end
end
if libOwnerFull(owner, maxPerOwner, nowMs) then return { 'too_many_owner_streams' } end
local live = redis.call('ZCARD', indexKey) - redis.call('ZCOUNT', indexKey, '-inf', nowMs)
if maxStreams > 0 and live >= maxStreams then return { 'too_many_streams' } end

-- A new stream's epoch is the ms elapsed since lib.lua's origin, and above every epoch minted
-- before (libMintEpoch): a stream deleted (or lost with Redis) and created again starts above every
-- offset handed out for its predecessor, even within the same millisecond.
local epoch = libMintEpoch(math.max(nowMs - LIB_ORIGIN_MS, floorEpoch + 1, 0))
local count = #ARGV - FIRST_ENTRY + 1
local expms = ''
if ttlMs ~= '' then expms = string.format('%d', nowMs + tonumber(ttlMs)) elseif expiresAtMs ~= '' then expms = expiresAtMs end

-- Keys Redis has not expired yet of an expired stream: gone before the new one is written.
redis.call('DEL', metaKey, dataKey, producersKey)
redis.call('HSET', metaKey, 'ct', contentType, 'ttl', ttl, 'exp', expiresAt, 'expms', expms, 'closed', closed,
  'epoch', string.format('%d', epoch), 'tail', count, 'sseq', '', 'rid', runId, 'cby', '', 'par', '', 'fp', '0',
  'refs', '0', 'gone', '0', 'spec', '', 'al', '', 'own', owner, 'mx', string.format('%d', libLargest(ARGV, FIRST_ENTRY)))
for i = 1, count do redis.call('XADD', dataKey, string.format('%d-0', i), 'd', ARGV[FIRST_ENTRY + i - 1]) end
redis.call('ZADD', indexKey, expms ~= '' and expms or '+inf', path)
if owner ~= '' then redis.call('ZADD', libOwnerIndex(owner), expms ~= '' and expms or '+inf', path) end
if expms ~= '' then libSettleExpiry(path) end
return { 'created', contentType, ttl, expiresAt, expms, closed, string.format('%d', epoch), string.format('%d', count), '0', '' }
