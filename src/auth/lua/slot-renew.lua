-- Renew this replica's leases on one key's slots (ARGV: leaseMs, members...): only members still
-- held (XX), so a slot released meanwhile is not brought back.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', now + lease, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], lease)
return 1
