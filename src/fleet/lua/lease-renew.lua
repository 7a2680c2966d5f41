-- lease-renew.lua: extend the lease only if it still holds exactly our value (replica and token): a
-- lease that expired and was taken by anyone, even by us again under a newer token, is not renewed.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
