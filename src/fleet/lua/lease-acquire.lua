-- lease-acquire.lua: take a capsule's ingestion lease when it is free and mint a fencing token in
-- the SAME atomic step, so a token is never handed to two holders. Called by lease.ts.
-- A lease held under our own replica id is taken back only while `reclaim` is set: by a process
-- that just started, so it is its previous incarnation's (a restart keeps its id: a fixed replicaId,
-- or the same host name and pid in a container) and the new token fences that one if it still runs.
-- Past its start a process never takes its own id's lease: two processes given the same id would
-- steal it from each other at every tick; this way the one started last wins, once.
local leaseKey = KEYS[1] -- string <prefix>:{capsule}:lease = "<replicaId>|<fence>", with a TTL
local metaKey = KEYS[2] -- hash <prefix>:{capsule}:meta, field fence (append.lua refuses older tokens)
local replicaId = ARGV[1]
local ttlMs = ARGV[2]
local reclaim = ARGV[3] == '1'

local holder = redis.call('GET', leaseKey)
if holder and not (reclaim and string.sub(holder, 1, #replicaId + 1) == replicaId .. '|') then
  return { 0, holder }
end

-- The token only grows, and never below Redis's clock in ms: a Redis that lost the meta key (a
-- restart from an old snapshot) still hands the next owner a token above any earlier owner's.
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local previous = tonumber(redis.call('HGET', metaKey, 'fence') or '0')
local fence = math.max(previous + 1, nowMs)
local token = string.format('%d', fence)
redis.call('HSET', metaKey, 'fence', token)
local value = replicaId .. '|' .. token
redis.call('SET', leaseKey, value, 'PX', ttlMs)
-- The token it replaces: a replica that held exactly that one knows nobody took the capsule since.
return { 1, value, string.format('%d', previous) }
