-- read.lua: a general stream's meta and the messages after a position (PROTOCOL.md §5.4, §5.5),
-- read atomically with the regression fence, so a reader never receives an offset of an epoch
-- Redis no longer holds. Lines shared with create.lua and append.lua are duplicated on purpose.
local metaKey = KEYS[1] -- hash: ct, ttl, exp, expms, closed, epoch, tail, sseq, rid, cby
local dataKey = KEYS[2] -- stream of messages, entry id <position>-0 (1-based), field d
local producersKey = KEYS[3]
local indexKey = KEYS[4]
local path = ARGV[1]
local after = tonumber(ARGV[2]) -- position: messages after it
local maxEntries = tonumber(ARGV[3]) -- 0 = the meta only (HEAD)
local maxBytes = tonumber(ARGV[4])
local floorEpoch = tonumber(ARGV[5])
local floorTail = tonumber(ARGV[6])
local runId = ARGV[7]

local ORIGIN_MS = 1767225600000
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local m = redis.call('HMGET', metaKey, 'ct', 'ttl', 'exp', 'expms', 'closed', 'epoch', 'tail', 'rid')
if not m[1] then return { 'not_found' } end
if m[4] and m[4] ~= '' and tonumber(m[4]) <= nowMs then
  redis.call('DEL', metaKey, dataKey, producersKey)
  redis.call('ZREM', indexKey, path)
  return { 'not_found' }
end

local epoch, tail = tonumber(m[6]), tonumber(m[7])
if floorEpoch > epoch or (floorEpoch == epoch and floorTail > tail) or (m[8] and m[8] ~= '' and m[8] ~= runId) then
  epoch = math.max(epoch + 1, floorEpoch + 1, nowMs - ORIGIN_MS)
  redis.call('HSET', metaKey, 'epoch', string.format('%d', epoch), 'rid', runId)
  -- Messages past the tail the meta records are not the stream's: dropped, and the stream's last id
  -- set back, so the next append's XADD at <tail + 1>-0 is accepted.
  for _, e in ipairs(redis.call('XRANGE', dataKey, string.format('(%d-0', tail), '+')) do
    redis.call('XDEL', dataKey, e[1])
  end
  if redis.call('EXISTS', dataKey) == 1 then redis.pcall('XSETID', dataKey, string.format('%d-0', tail)) end
elseif m[8] ~= runId then
  redis.call('HSET', metaKey, 'rid', runId)
end

local out = { 'found', m[1], m[2] or '', m[3] or '', m[4] or '', m[5] or '0', string.format('%d', epoch), tostring(tail) }
if maxEntries > 0 and after < tail then
  local entries = redis.call('XRANGE', dataKey, string.format('%d-0', after + 1), '+', 'COUNT', maxEntries)
  local bytes = 0
  -- At least one message per read, however large: a reader always makes progress.
  for i, entry in ipairs(entries) do
    local data = entry[2][2]
    if i > 1 and bytes + #data > maxBytes then break end
    bytes = bytes + #data
    table.insert(out, data)
  end
end
return out
