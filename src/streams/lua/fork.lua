-- fork.lua: PUT with Stream-Forked-From (PROTOCOL.md §4.2) in ONE atomic step: the idempotent
-- compare, the source's checks, the fork point (Stream-Fork-Offset, Stream-Fork-Sub-Offset), the
-- count bound, the fork's meta and first messages, and the source's new reference, or nothing at
-- all. The fork copies none of the source's messages (a read stitches them, lib.lua) except the
-- partial message a byte sub-offset cuts. The rules are forks.ts's, restated (a script cannot import).
local metaKey = KEYS[1]
local dataKey = KEYS[2]
local producersKey = KEYS[3]
local indexKey = KEYS[4]
local path = ARGV[1]
local contentType = ARGV[2]
local ttl = ARGV[3]
local expiresAt = ARGV[4]
local ttlMs = ARGV[5]
local expiresAtMs = ARGV[6]
local closed = ARGV[7]
local maxStreams = tonumber(ARGV[8])
local floorEpoch = tonumber(ARGV[9])
local runId = ARGV[10]
local owner = ARGV[11] -- as create.lua's
local maxPerOwner = tonumber(ARGV[12])
local source = ARGV[13]
local offsetEpoch = ARGV[14] -- '' = the source's tail
local offsetPos = tonumber(ARGV[15])
local subOffset = tonumber(ARGV[16])
local spec = ARGV[17] -- forkSpecOf the request
local inheritType = ARGV[18] == '1'
local inheritExpiry = ARGV[19] == '1'
local maxDepth = tonumber(ARGV[20]) -- forks.ts MAX_FORK_DEPTH
local tooDeep = ARGV[21]
local FIRST_ENTRY = 22

local nowMs = libNowMs()

local state = libState(path, nowMs)
if state == 'gone' then return { 'gone' } end
if state == 'live' then
  local e = redis.call('HMGET', metaKey, 'ct', 'ttl', 'exp', 'expms', 'closed', 'epoch', 'tail', 'al', 'spec')
  local same = (e[9] or '') == spec and (inheritType or e[1] == contentType)
    and (inheritExpiry or ((e[2] or '') == ttl and (e[3] or '') == expiresAt)) and (e[5] or '0') == closed
  return { same and 'exists' or 'conflict', e[1], e[2] or '', e[3] or '', e[4] or '', e[5] or '0', e[6] or '0',
    e[7] or '0', '0', e[8] or '' }
end

local sourceState = libState(source, nowMs)
if sourceState == 'not_found' then return { 'source_not_found' } end
if sourceState == 'gone' then return { 'source_gone' } end
local sourceMeta = libKeys(source)
local s = redis.call('HMGET', sourceMeta, 'ct', 'ttl', 'exp', 'expms', 'epoch', 'tail', 'al')
if not inheritType and contentType ~= s[1] then return { 'source_type_mismatch' } end
local sourceEpoch, sourceTail = tonumber(s[5]), tonumber(s[6])

-- Where the offset points in the source (forks.ts resolveOffset). The source is not fenced here: an
-- offset of its recorded epoch up to its recorded tail names what readers of that epoch received.
local aliases = {}
for e, u in string.gmatch(s[7] or '', '(%d+):(%d+)') do table.insert(aliases, { tonumber(e), tonumber(u) }) end
if #aliases >= maxDepth then return { 'bad_fork', 'bad_request', tooDeep } end
local position = sourceTail
if offsetEpoch ~= '' then
  local e = tonumber(offsetEpoch)
  position = nil
  if offsetPos == 0 then position = 0
  elseif e == sourceEpoch then
    if offsetPos > sourceTail then return { 'bad_fork', 'bad_request', 'Stream-Fork-Offset: offset beyond the tail of the stream' } end
    position = offsetPos
  else
    for _, a in ipairs(aliases) do
      if a[1] == e then
        if offsetPos > a[2] then
          return { 'bad_fork', 'bad_request', 'Stream-Fork-Offset: offset of the source past the fork point' }
        end
        position = offsetPos
      end
    end
    if position == nil then
      if e < sourceEpoch then return { 'bad_fork', 'offset_gone', 'Stream-Fork-Offset: offset from an earlier epoch of this stream' } end
      return { 'bad_fork', 'bad_request', 'Stream-Fork-Offset: offset beyond the tail of the stream' }
    end
  end
end

-- The sub-offset (forks.ts forkPointOf): JSON messages move the fork point; bytes of the next
-- message are copied when they cut it.
local forkPoint, prefix = position, nil
if subOffset > 0 then
  if s[1] == 'application/json' then
    if position + subOffset > sourceTail then
      return { 'bad_fork', 'bad_request', 'Stream-Fork-Sub-Offset past the messages of the source' }
    end
    forkPoint = position + subOffset
  else
    local next = {}
    libCollect(source, position, sourceTail, next, 1, 0, 0)
    if not next[1] or subOffset > #next[1] then
      return { 'bad_fork', 'bad_request', 'Stream-Fork-Sub-Offset past the next message of the source' }
    end
    if subOffset == #next[1] then forkPoint = position + 1 else prefix = string.sub(next[1], 1, subOffset) end
  end
end

for _, p in ipairs(redis.call('ZRANGEBYSCORE', indexKey, '-inf', nowMs, 'LIMIT', 0, 16)) do
  if libState(p, nowMs) == 'not_found' then redis.call('ZREM', indexKey, p) end
end
if libOwnerFull(owner, maxPerOwner, nowMs) then return { 'too_many_owner_streams' } end
local live = redis.call('ZCARD', indexKey) - redis.call('ZCOUNT', indexKey, '-inf', nowMs)
if maxStreams > 0 and live >= maxStreams then return { 'too_many_streams' } end

-- What the PUT omitted comes from the source; a fork starts open unless told.
local ct = inheritType and s[1] or contentType
local expms = ''
if inheritExpiry then
  ttl, expiresAt = s[2] or '', s[3] or ''
  if ttl ~= '' then expms = string.format('%d', nowMs + tonumber(ttl) * 1000) elseif expiresAt ~= '' then expms = s[4] end
elseif ttlMs ~= '' then expms = string.format('%d', nowMs + tonumber(ttlMs))
elseif expiresAtMs ~= '' then expms = expiresAtMs end

-- Above the source's epoch: an offset of the source past the fork point never names a fork position.
local epoch = libMintEpoch(math.max(nowMs - LIB_ORIGIN_MS, floorEpoch + 1, sourceEpoch + 1))
local al = { string.format('%d:%d', sourceEpoch, forkPoint) }
for _, a in ipairs(aliases) do table.insert(al, string.format('%d:%d', a[1], math.min(a[2], forkPoint))) end

local own = {}
if prefix then table.insert(own, prefix) end
for i = FIRST_ENTRY, #ARGV do table.insert(own, ARGV[i]) end
redis.call('DEL', metaKey, dataKey, producersKey)
redis.call('HSET', metaKey, 'ct', ct, 'ttl', ttl, 'exp', expiresAt, 'expms', expms, 'closed', closed,
  'epoch', string.format('%d', epoch), 'tail', string.format('%d', forkPoint + #own), 'sseq', '', 'rid', runId, 'cby', '',
  'par', source, 'fp', string.format('%d', forkPoint), 'refs', '0', 'gone', '0', 'spec', spec, 'al', table.concat(al, ';'), 'own', owner,
  'mx', string.format('%d', libLargest(own, 1)))
for i, data in ipairs(own) do redis.call('XADD', dataKey, string.format('%d-0', forkPoint + i), 'd', data) end
redis.call('ZADD', indexKey, expms ~= '' and expms or '+inf', path)
if owner ~= '' then redis.call('ZADD', libOwnerIndex(owner), expms ~= '' and expms or '+inf', path) end
libSettleExpiry(path)
redis.call('HINCRBY', sourceMeta, 'refs', 1)
libSettleExpiry(source)
return { 'created', ct, ttl, expiresAt, expms, closed, string.format('%d', epoch), string.format('%d', forkPoint + #own), '0',
  table.concat(al, ';') }
