-- append.lua: POSTs to one general stream (PROTOCOL.md §5.2, §5.2.1), several per call: the appends
-- that queued for the stream while its last call ran (redis-stream-store.ts), in their order. Each
-- is checked and written exactly as it would be alone, in ONE atomic step of its own: the closed
-- check, the content type, the idempotent producer's validation, Stream-Seq, the messages, the
-- producer state, the new tail and the close commit together or not at all, and a refused one
-- writes nothing while the others land. Answers one reply per append. Wakes every replica's waiters
-- (one PUBLISH for the call). Lines shared with create.lua and read.lua are duplicated on purpose;
-- lib.lua (prepended) holds expiry, sliding TTL and soft delete.
local metaKey = KEYS[1] -- hash: ct, ttl, exp, expms, closed, epoch, tail, sseq, sseqp, rid, cby (+ lib.lua's)
local dataKey = KEYS[2] -- stream of messages, entry id <position>-0 (1-based), field d
local producersKey = KEYS[3] -- hash: producer id -> "<epoch>:<lastSeq>"
local indexKey = KEYS[4] -- sorted set of every stream's path, scored by expiry
local path = ARGV[1]
local floorEpoch = tonumber(ARGV[2]) -- the highest offset this process handed out: epoch (-1 = none)
local floorTail = tonumber(ARGV[3]) -- ... and position
local runId = ARGV[4] -- this Redis process's run id, as the store last read it
local channel = ARGV[5] -- pub/sub channel that wakes waiters on every replica
local followersKey = ARGV[6] -- string: the followers' generation (redis-stream-store.ts followersChanged)
local appends = tonumber(ARGV[7])
-- Then each append: content type ('' = close-only, not compared), '=' .. Stream-Seq or '' without
-- one (an empty one is a value), producer id ('' = no producer headers), producer epoch, producer
-- seq, close ('1'), the number of messages, the messages.
local FIRST_APPEND = 8

local nowMs = libNowMs()

local state = libState(path, nowMs)
if state ~= 'live' then
  local out = {}
  for n = 1, appends do out[n] = { state } end
  return out
end
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

-- One append: its arguments are ARGV[at .. at + 6], its messages the `count` after them.
local function appendOne(at)
  local contentType = ARGV[at]
  local hasSeq = ARGV[at + 1] ~= ''
  local streamSeq = string.sub(ARGV[at + 1], 2)
  local producerId = ARGV[at + 2]
  local producerEpoch = tonumber(ARGV[at + 3])
  local producerSeq = tonumber(ARGV[at + 4])
  local close = ARGV[at + 5] == '1'
  local count = tonumber(ARGV[at + 6])
  local first = at + 7

  local tuple = producerId ~= '' and (producerId .. '\n' .. ARGV[at + 3] .. '\n' .. ARGV[at + 4]) or ''
  local pstate = nil
  if producerId ~= '' then
    local raw = redis.call('HGET', producersKey, producerId)
    if raw then
      local e, s = string.match(raw, '^(%d+):(%d+)$')
      pstate = { epoch = tonumber(e), lastSeq = tonumber(s) }
    end
  end

  if m[5] == '1' then
    -- Closed: the retry of the closing batch is a duplicate; a zombie producer is still fenced.
    if tuple ~= '' and tuple == m[10] then return reply('duplicate', ARGV[at + 3], ARGV[at + 4]) end
    -- Closing again, with nothing to append and no producer to check: already done.
    if producerId == '' and close and count == 0 then return reply('duplicate') end
    if pstate and producerEpoch < pstate.epoch then
      return reply('stale_producer_epoch', string.format('%d', pstate.epoch))
    end
    return reply('closed')
  end
  if contentType ~= '' and contentType ~= m[1] then return reply('content_type_mismatch') end

  -- §5.2.1, as producer-check.ts.
  local nextEpoch, nextSeq = nil, nil
  if producerId ~= '' then
    if not pstate then
      if producerSeq ~= 0 then return reply('producer_seq_gap', '0', ARGV[at + 4]) end
      nextEpoch, nextSeq = producerEpoch, 0
    elseif producerEpoch < pstate.epoch then
      return reply('stale_producer_epoch', string.format('%d', pstate.epoch))
    elseif producerEpoch > pstate.epoch then
      if producerSeq ~= 0 then return reply('producer_epoch_seq_not_zero') end
      nextEpoch, nextSeq = producerEpoch, 0
    elseif producerSeq <= pstate.lastSeq then
      return reply('duplicate', string.format('%d', pstate.epoch), string.format('%d', pstate.lastSeq))
    elseif producerSeq == pstate.lastSeq + 1 then
      nextEpoch, nextSeq = pstate.epoch, producerSeq
    else
      return reply('producer_seq_gap', string.format('%d', pstate.lastSeq + 1), ARGV[at + 4])
    end
  end

  -- Stream-Seq is scoped per stream: byte-wise lexicographic, strictly increasing (§5.2).
  -- A recorded one: sseqp '1' (an empty Stream-Seq is recorded too), or a non-empty sseq.
  local hasLast = m[12] == '1' or (m[8] and m[8] ~= '')
  if hasSeq and hasLast and streamSeq <= m[8] then return reply('stream_seq_conflict') end

  -- Every check passed: only now is anything written.
  local largest = 0
  for i = 1, count do
    local message = ARGV[first + i - 1]
    if #message > largest then largest = #message end
    redis.call('XADD', dataKey, string.format('%d-0', tail + i), 'd', message)
  end
  tail = tail + count
  local fields = { 'tail', string.format('%d', tail) }
  -- Kept only where the stream began with it: a stream made before has none, and never a partial one.
  if m[13] and largest > tonumber(m[13]) then
    m[13] = string.format('%d', largest)
    table.insert(fields, 'mx'); table.insert(fields, m[13])
  end
  if hasSeq then
    m[8] = streamSeq
    m[12] = '1'
    table.insert(fields, 'sseq'); table.insert(fields, streamSeq)
    table.insert(fields, 'sseqp'); table.insert(fields, '1')
  end
  if close then
    m[5] = '1'
    m[10] = tuple
    table.insert(fields, 'closed'); table.insert(fields, '1')
    table.insert(fields, 'cby'); table.insert(fields, tuple)
  end
  redis.call('HSET', metaKey, unpack(fields))
  if nextEpoch then
    redis.call('HSET', producersKey, producerId, string.format('%d:%d', nextEpoch, nextSeq))
  end
  return reply('appended', nextEpoch and string.format('%d', nextEpoch) or '', nextSeq and string.format('%d', nextSeq) or '')
end

local out = {}
local appended = {}
local at = FIRST_APPEND
for n = 1, appends do
  out[n] = appendOne(at)
  if out[n][1] == 'appended' then table.insert(appended, out[n]) end
  at = at + 7 + tonumber(ARGV[at + 6])
end
if #appended > 0 then
  -- The data and producer keys may be new: they take the stream's expiry (none for forks, lib.lua).
  if m[4] and m[4] ~= '' then libSettleExpiry(path) end
  redis.call('PUBLISH', channel, path)
  -- Read with the appends: a follower created before them is seen by whoever handles them.
  local followers = redis.call('GET', followersKey) or '0'
  for _, r in ipairs(appended) do table.insert(r, followers) end
end
return out
