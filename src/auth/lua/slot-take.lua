-- Concurrency slots, one sorted set per key: member = replica + connection, score = lease expiry
-- (Redis ms). Holders renew their leases; a crashed replica's slots expire with their leases.
-- ARGV: member, cap, leaseMs. Returns 1 when the slot is held (new or renewed), 0 at the cap.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
redis.call('PEXPIRE', KEYS[1], lease)
return 1
