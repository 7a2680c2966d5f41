-- The signing key ring: KEYS[1]. ARGV[1] the expected JSON ('' : only if absent), ARGV[2] the new.
-- Replies the stored ring after the call (the caller compares it with what it wrote).
local current = redis.call('GET', KEYS[1])
if (current == false and ARGV[1] == '') or current == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return ARGV[2]
end
return current
