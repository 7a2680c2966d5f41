-- lease-peek.lua: who holds a capsule's lease now and the current fencing token, read together.
local holder = redis.call('GET', KEYS[1])
local fence = redis.call('HGET', KEYS[2], 'fence') or '0'
return { holder or '', fence }
