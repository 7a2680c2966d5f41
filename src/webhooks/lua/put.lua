-- One owned document's compare-and-set (owned-documents.ts put: subscriptions, task webhooks).
-- KEYS[1] the document hash, KEYS[2] the set of every key, KEYS[3] the owner's set.
-- ARGV[1] expected version (0: absent), ARGV[2] the document JSON ('' deletes), ARGV[3] the key,
-- ARGV[4] the owner's share. Replies the new version, -1 (moved) or -2 (owner full).
local current = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if current ~= tonumber(ARGV[1]) then return -1 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[3])
  redis.call('SREM', KEYS[3], ARGV[3])
  return 0
end
if current == 0 and redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[4]) then return -2 end
redis.call('HSET', KEYS[1], 'v', current + 1, 'doc', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[3])
return current + 1
