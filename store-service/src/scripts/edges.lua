-- The edges heard from lately: one sorted set, scored by when each was last
-- heard (ms on Redis's clock), trimmed to the last ARGV[1] ms.
-- KEYS[1]: the set; ARGV[1]: the TTL (ms); ARGV[2..]: names heard since the
-- last call. Returns how many names were heard within the TTL.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], now, ARGV[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - ttl))
if redis.call('ZCARD', KEYS[1]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return redis.call('ZCARD', KEYS[1])
