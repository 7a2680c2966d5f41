-- delete.lua: DELETE of a general stream (PROTOCOL.md §5.3): its keys and its place in the count,
-- in one step, and a wake for every replica's waiters (they answer 404 next).
local metaKey = KEYS[1]
local dataKey = KEYS[2]
local producersKey = KEYS[3]
local indexKey = KEYS[4]
local path = ARGV[1]
local channel = ARGV[2]
-- An expired stream (its keys not yet reaped) no longer exists: 404, as on every other method.
local expms = redis.call('HGET', metaKey, 'expms')
local existed = redis.call('EXISTS', metaKey)
if expms and expms ~= '' then
  local t = redis.call('TIME')
  if tonumber(expms) <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then existed = 0 end
end
redis.call('DEL', metaKey, dataKey, producersKey)
redis.call('ZREM', indexKey, path)
if existed == 1 then redis.call('PUBLISH', channel, path) end
return existed
