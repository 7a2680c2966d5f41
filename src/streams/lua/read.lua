-- read.lua: a general stream's meta and the messages after a position (PROTOCOL.md §5.4, §5.5),
-- read atomically with the regression fence, so a reader never receives an offset of an epoch
-- Redis no longer holds. A fork's read stitches its ancestors' messages (lib.lua). Lines shared
-- with append.lua are duplicated on purpose.
local metaKey = KEYS[1] -- hash: ct, ttl, exp, expms, closed, epoch, tail, sseq, rid, cby (+ lib.lua's)
local dataKey = KEYS[2] -- stream of messages, entry id <position>-0 (1-based), field d
local path = ARGV[1]
local after = tonumber(ARGV[2]) -- position: messages after it
local maxEntries = tonumber(ARGV[3]) -- 0 = the meta only
local maxBytes = tonumber(ARGV[4])
local floorEpoch = tonumber(ARGV[5])
local floorTail = tonumber(ARGV[6])
local runId = ARGV[7]
local touch = ARGV[8] == '1' -- a GET (renews a sliding TTL), not a HEAD
local sizes = ARGV[9] == '1' -- the meta only, then the fork point and `mx` (redis-stream-store.ts readPlain)

local nowMs = libNowMs()

local state = libState(path, nowMs)
if state == 'not_found' then return { 'not_found' } end

local m = redis.call('HMGET', metaKey, 'ct', 'ttl', 'exp', 'expms', 'closed', 'epoch', 'tail', 'rid', 'al')
local epoch, tail = tonumber(m[6]), tonumber(m[7])
if state == 'live' then
  epoch = libFenceEpoch(metaKey, dataKey, epoch, tail, m[8], floorEpoch, floorTail, runId, nowMs)
  if touch then
    libTouch(path, nowMs)
    m[4] = redis.call('HGET', metaKey, 'expms')
  end
end

local out = { 'found', m[1], m[2] or '', m[3] or '', m[4] or '', m[5] or '0', string.format('%d', epoch),
  string.format('%d', tail), state == 'gone' and '1' or '0', m[9] or '' }
if sizes then
  local f = redis.call('HMGET', metaKey, 'fp', 'mx')
  table.insert(out, f[1] or '0')
  table.insert(out, f[2] or '')
  return out
end
if state == 'live' and maxEntries > 0 and after < tail then
  local entries = {}
  libCollect(path, after, tail, entries, maxEntries, maxBytes, 0)
  for _, data in ipairs(entries) do table.insert(out, data) end
end
return out
