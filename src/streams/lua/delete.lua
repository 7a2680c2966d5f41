-- delete.lua: DELETE of a general stream (PROTOCOL.md §5.3): its keys and its place in the count,
-- in one step, and a wake for every replica's waiters (they answer 404 next).
local metaKey = KEYS[1]
local dataKey = KEYS[2]
local producersKey = KEYS[3]
local indexKey = KEYS[4]
local path = ARGV[1]
local channel = ARGV[2]
local existed = redis.call('EXISTS', metaKey)
redis.call('DEL', metaKey, dataKey, producersKey)
redis.call('ZREM', indexKey, path)
if existed == 1 then redis.call('PUBLISH', channel, path) end
return existed
