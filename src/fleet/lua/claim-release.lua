-- claim-release.lua: delete a claim only if it still holds exactly our value (compare-and-delete),
-- so a claim that expired and was taken by another replica is never released by its old holder.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
