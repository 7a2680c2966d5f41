-- replicas-beat.lua: the live replica set, a ZSET of replica ids scored by when their heartbeat
-- expires (Redis's clock, so replicas' clocks never matter). Refresh (or drop) one replica, prune the
-- expired, answer the live set. One key: single-slot on a Cluster.
local key = KEYS[1]
local replicaId = ARGV[1]
local ttlMs = tonumber(ARGV[2])
local leaving = ARGV[3] == '1'
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', nowMs))
if leaving then
  redis.call('ZREM', key, replicaId)
else
  redis.call('ZADD', key, string.format('%d', nowMs + ttlMs), replicaId)
end
return redis.call('ZRANGE', key, 0, -1)
