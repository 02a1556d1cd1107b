-- ARGV: tenant, override JSON, expiry (unix ms, '' for none). Returns the version.
epoch()
local tenant = ARGV[1]
local v = bump()
redis.call('HSET', DATA, tenant, ARGV[2])
redis.call('ZADD', LOG, v, tenant)
redis.call('ZREM', GONE, tenant)
if ARGV[3] ~= '' then
  redis.call('ZADD', EXP, ARGV[3], tenant)
else
  redis.call('ZREM', EXP, tenant)
end
return v
