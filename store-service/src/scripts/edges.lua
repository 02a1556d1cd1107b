-- The edges heard from lately: one sorted set of the fleet's names, scored by
-- when each was last heard (ms on Redis's clock), trimmed to the last ARGV[1]
-- ms; and one such set per edge-token scope, which holds at most its token's
-- allowance of live names. A name an edge token sent enters the fleet's set
-- only within that allowance, so made-up names can't shrink every edge's
-- share of a quota by more than it.
-- KEYS[1]: the fleet's set; KEYS[2..]: the scopes' sets.
-- ARGV[1]: the TTL (ms); ARGV[2]: how many names with no scope follow (an
-- operator's, or under --insecure-no-auth), then those names; then for each
-- scope set in KEYS order: its allowance, how many names follow, the names.
-- Returns the fleet's live count, then for each name refused (a new name past
-- its scope's allowance) the scope's index (1 for KEYS[2]) and the name.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local fleet = KEYS[1]
local at = 3
for i = 1, tonumber(ARGV[2]) do
  redis.call('ZADD', fleet, now, ARGV[at])
  at = at + 1
end
local reply = {0}
for k = 2, #KEYS do
  local set = KEYS[k]
  local allowance, count = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
  at = at + 2
  redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. (now - ttl))
  for i = 1, count do
    local name = ARGV[at]
    at = at + 1
    if redis.call('ZSCORE', set, name) or redis.call('ZCARD', set) < allowance then
      redis.call('ZADD', set, now, name)
      redis.call('ZADD', fleet, now, name)
    else
      reply[#reply + 1] = k - 1
      reply[#reply + 1] = name
    end
  end
  if redis.call('ZCARD', set) > 0 then
    redis.call('PEXPIRE', set, ttl)
  end
end
redis.call('ZREMRANGEBYSCORE', fleet, '-inf', '(' .. (now - ttl))
if redis.call('ZCARD', fleet) > 0 then
  redis.call('PEXPIRE', fleet, ttl)
end
reply[1] = redis.call('ZCARD', fleet)
return reply
