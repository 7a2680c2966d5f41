-- Token bucket, one hash per bucket: {tokens, ms}. Refilled at ARGV[1] tokens/s up to ARGV[2];
-- takes ARGV[3] tokens when there are enough. Time is Redis's, so every replica agrees on it.
-- Returns {1, 0} when taken, {0, retryAfterMs} when not (nothing is taken then).
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ms')
local tokens = tonumber(state[1]) or burst
local last = tonumber(state[2]) or now
if now > last then tokens = math.min(burst, tokens + (now - last) * rate / 1000) end
local allowed = 0
local retry = 0
if tokens >= n then
  tokens = tokens - n
  allowed = 1
else
  retry = math.ceil((n - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ms', tostring(now))
-- A full bucket is the same as none: the key lives only as long as it takes to refill.
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return {allowed, retry}
