-- lease-release.lua: delete the lease only if it still holds exactly our value (compare-and-delete).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
