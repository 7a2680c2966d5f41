-- create.lua: PUT of a general stream (PROTOCOL.md §5.1) in ONE atomic step: the idempotent
-- compare with an existing stream, the stream-count bound, the meta hash, the initial messages and
-- the expiry, or nothing at all. Called by redis-stream-store.ts. Lines shared with append.lua and
-- read.lua are duplicated on purpose (an EVAL script cannot include another).
local metaKey = KEYS[1] -- hash: ct, ttl, exp, expms, closed, epoch, tail, sseq, rid, cby
local dataKey = KEYS[2] -- stream of messages, entry id <position>-0 (1-based), field d
local producersKey = KEYS[3] -- hash: producer id -> "<epoch>:<lastSeq>"
local indexKey = KEYS[4] -- sorted set of every stream's path, scored by its expiry in ms (inf: none)
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
local FIRST_ENTRY = 11

-- 2026-01-01T00:00:00Z in ms. A new stream's epoch is the ms elapsed since: a stream deleted (or lost
-- with Redis) and created again starts above every offset handed out for its predecessor.
local ORIGIN_MS = 1767225600000
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function metaReply(m)
  return { m[1] or '', m[2] or '', m[3] or '', m[4] or '', m[5] or '0', m[6] or '0', m[7] or '0' }
end

local existing = redis.call('HMGET', metaKey, 'ct', 'ttl', 'exp', 'expms', 'closed', 'epoch', 'tail')
if existing[1] and existing[4] and existing[4] ~= '' and tonumber(existing[4]) <= nowMs then
  redis.call('DEL', metaKey, dataKey, producersKey)
  redis.call('ZREM', indexKey, path)
  existing = { false }
end
if existing[1] then
  local same = existing[1] == contentType and (existing[2] or '') == ttl and (existing[3] or '') == expiresAt
    and (existing[5] or '0') == closed
  return { same and 'exists' or 'conflict', unpack(metaReply(existing)) }
end

-- Expired streams leave the count here (their keys expire on their own, PEXPIREAT below).
redis.call('ZREMRANGEBYSCORE', indexKey, '-inf', nowMs)
if maxStreams > 0 and redis.call('ZCARD', indexKey) >= maxStreams then return { 'too_many_streams' } end

local epoch = math.max(nowMs - ORIGIN_MS, floorEpoch + 1, 0)
local count = #ARGV - FIRST_ENTRY + 1
local expms = ''
if ttlMs ~= '' then expms = tostring(nowMs + tonumber(ttlMs)) elseif expiresAtMs ~= '' then expms = expiresAtMs end

redis.call('HSET', metaKey, 'ct', contentType, 'ttl', ttl, 'exp', expiresAt, 'expms', expms, 'closed', closed,
  'epoch', string.format('%d', epoch), 'tail', count, 'sseq', '', 'rid', runId, 'cby', '')
for i = 1, count do redis.call('XADD', dataKey, string.format('%d-0', i), 'd', ARGV[FIRST_ENTRY + i - 1]) end
redis.call('ZADD', indexKey, expms ~= '' and expms or '+inf', path)
if expms ~= '' then
  redis.call('PEXPIREAT', metaKey, expms)
  if count > 0 then redis.call('PEXPIREAT', dataKey, expms) end
end
return { 'created', contentType, ttl, expiresAt, expms, closed, string.format('%d', epoch), tostring(count) }
