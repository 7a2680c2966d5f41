-- append.lua: POST to a general stream (PROTOCOL.md §5.2, §5.2.1) in ONE atomic step: the
-- closed check, the content type, the idempotent producer's validation, Stream-Seq, the messages,
-- the producer state, the new tail and the close commit together or not at all. Wakes every
-- replica's waiters (PUBLISH). Lines shared with create.lua and read.lua are duplicated on purpose;
-- lib.lua (prepended) holds expiry, sliding TTL and soft delete.
local metaKey = KEYS[1] -- hash: ct, ttl, exp, expms, closed, epoch, tail, sseq, sseqp, rid, cby (+ lib.lua's)
local dataKey = KEYS[2] -- stream of messages, entry id <position>-0 (1-based), field d
local producersKey = KEYS[3] -- hash: producer id -> "<epoch>:<lastSeq>"
local indexKey = KEYS[4] -- sorted set of every stream's path, scored by expiry
local path = ARGV[1]
local contentType = ARGV[2] -- '' = close-only (not compared)
local hasSeq = ARGV[3] ~= '' -- ARGV[3] is '=' .. Stream-Seq, or '' without one (an empty one is a value)
local streamSeq = string.sub(ARGV[3], 2)
local producerId = ARGV[4] -- '' = no producer headers
local producerEpoch = tonumber(ARGV[5])
local producerSeq = tonumber(ARGV[6])
local close = ARGV[7] == '1'
local floorEpoch = tonumber(ARGV[8]) -- the highest offset this process handed out: epoch (-1 = none)
local floorTail = tonumber(ARGV[9]) -- ... and position
local runId = ARGV[10] -- this Redis process's run id, as the store last read it
local channel = ARGV[11] -- pub/sub channel that wakes waiters on every replica
local followersKey = ARGV[12] -- string: the followers' generation (redis-stream-store.ts followersChanged)
local FIRST_ENTRY = 13

local nowMs = libNowMs()

local state = libState(path, nowMs)
if state ~= 'live' then return { state } end
-- Any append to a live stream is an access: a sliding TTL renews, refused or not.
libTouch(path, nowMs)
local m = redis.call('HMGET', metaKey, 'ct', 'ttl', 'exp', 'expms', 'closed', 'epoch', 'tail', 'sseq', 'rid', 'cby', 'al',
  'sseqp', 'mx')

local tail = tonumber(m[7])
local epoch = libFenceEpoch(metaKey, dataKey, tonumber(m[6]), tail, m[9], floorEpoch, floorTail, runId, nowMs)

local function reply(kind, a, b)
  return { kind, m[1], m[2] or '', m[3] or '', m[4] or '', m[5] or '0', string.format('%d', epoch),
    string.format('%d', tail), '0', m[11] or '', a or '', b or '' }
end

local tuple = producerId ~= '' and (producerId .. '\n' .. ARGV[5] .. '\n' .. ARGV[6]) or ''
local state = nil
if producerId ~= '' then
  local raw = redis.call('HGET', producersKey, producerId)
  if raw then
    local e, s = string.match(raw, '^(%d+):(%d+)$')
    state = { epoch = tonumber(e), lastSeq = tonumber(s) }
  end
end

if m[5] == '1' then
  -- Closed: the retry of the closing batch is a duplicate; a zombie producer is still fenced.
  if tuple ~= '' and tuple == m[10] then return reply('duplicate', ARGV[5], ARGV[6]) end
  -- Closing again, with nothing to append and no producer to check: already done.
  if producerId == '' and close and #ARGV < FIRST_ENTRY then return reply('duplicate') end
  if state and producerEpoch < state.epoch then return reply('stale_producer_epoch', string.format('%d', state.epoch)) end
  return reply('closed')
end
if contentType ~= '' and contentType ~= m[1] then return reply('content_type_mismatch') end

-- §5.2.1, as producer-check.ts.
local nextEpoch, nextSeq = nil, nil
if producerId ~= '' then
  if not state then
    if producerSeq ~= 0 then return reply('producer_seq_gap', '0', ARGV[6]) end
    nextEpoch, nextSeq = producerEpoch, 0
  elseif producerEpoch < state.epoch then
    return reply('stale_producer_epoch', string.format('%d', state.epoch))
  elseif producerEpoch > state.epoch then
    if producerSeq ~= 0 then return reply('producer_epoch_seq_not_zero') end
    nextEpoch, nextSeq = producerEpoch, 0
  elseif producerSeq <= state.lastSeq then
    return reply('duplicate', string.format('%d', state.epoch), string.format('%d', state.lastSeq))
  elseif producerSeq == state.lastSeq + 1 then
    nextEpoch, nextSeq = state.epoch, producerSeq
  else
    return reply('producer_seq_gap', string.format('%d', state.lastSeq + 1), ARGV[6])
  end
end

-- Stream-Seq is scoped per stream: byte-wise lexicographic, strictly increasing (§5.2).
-- A recorded one: sseqp '1' (an empty Stream-Seq is recorded too), or a non-empty sseq.
local hasLast = m[12] == '1' or (m[8] and m[8] ~= '')
if hasSeq and hasLast and streamSeq <= m[8] then return reply('stream_seq_conflict') end

-- Every check passed: only now is anything written.
local count = #ARGV - FIRST_ENTRY + 1
for i = 1, count do
  redis.call('XADD', dataKey, string.format('%d-0', tail + i), 'd', ARGV[FIRST_ENTRY + i - 1])
end
tail = tail + count
local fields = { 'tail', string.format('%d', tail) }
-- Kept only where the stream began with it: a stream made before has none, and never a partial one.
if m[13] then
  local largest = libLargest(ARGV, FIRST_ENTRY)
  if largest > tonumber(m[13]) then table.insert(fields, 'mx'); table.insert(fields, string.format('%d', largest)) end
end
if hasSeq then
  table.insert(fields, 'sseq'); table.insert(fields, streamSeq)
  table.insert(fields, 'sseqp'); table.insert(fields, '1')
end
if close then
  m[5] = '1'
  table.insert(fields, 'closed'); table.insert(fields, '1')
  table.insert(fields, 'cby'); table.insert(fields, tuple)
end
redis.call('HSET', metaKey, unpack(fields))
if nextEpoch then
  redis.call('HSET', producersKey, producerId, string.format('%d:%d', nextEpoch, nextSeq))
end
-- The data and producer keys may be new: they take the stream's expiry (none for forks, lib.lua).
if m[4] and m[4] ~= '' then libSettleExpiry(path) end
redis.call('PUBLISH', channel, path)
local out = reply('appended', nextEpoch and string.format('%d', nextEpoch) or '', nextSeq and string.format('%d', nextSeq) or '')
-- Read with the append: a follower created before it is seen by whoever handles it.
table.insert(out, redis.call('GET', followersKey) or '0')
return out
