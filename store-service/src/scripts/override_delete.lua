-- ARGV: tenant. Returns 1 when it had an override in the log, else 0.
epoch()
if redis.call('HEXISTS', DATA, ARGV[1]) == 0 then
  return 0
end
forget(ARGV[1])
trim()
return 1
