-- delete.lua: DELETE of a general stream (PROTOCOL.md §5.3, §4.2) in one step: its keys and its
-- place in the count, or, while forks read its messages, a soft delete (410 from then on; the last
-- fork's removal removes it, lib.lua). Wakes every replica's waiters (they answer 404 or 410 next).
local path = ARGV[1]
local channel = ARGV[2]
-- An expired stream (its keys not yet reaped) no longer exists: 404, as on every other method.
local state = libState(path, libNowMs())
if state ~= 'live' then return state end
libDrop(path)
redis.call('PUBLISH', channel, path)
return 'deleted'
