-- reap.lua: expired streams nobody touched, at most ARGV[1] of them: removed, or soft-deleted
-- while forks read them (lib.lua). Forks carry no Redis key expiry, so this is what releases an
-- expired fork's hold on its source. Returns how many were reaped.
local limit = tonumber(ARGV[1])
local nowMs = libNowMs()
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', nowMs, 'LIMIT', 0, limit)
for _, p in ipairs(expired) do
  -- Keys Redis expired itself (a plain stream) leave only the index entry behind.
  if libState(p, nowMs) == 'not_found' then redis.call('ZREM', KEYS[4], p) end
end
return #expired
