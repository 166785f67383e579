-- UNLEASE: give the lease up if we hold it. KEYS: leader. ARGV: id, fence.
if redis.call('GET', KEYS[1]) == ARGV[1] .. '|' .. ARGV[2] then
  return redis.call('DEL', KEYS[1])
end
return 0
