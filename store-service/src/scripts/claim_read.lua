-- What a claim key reads as in either layout (for tests and operators;
-- preceded by claims.lua). KEYS[1]: the claim key
-- `ankusa:{t}:claim:<source>:<event key>`; ARGV[1]: the hex of the event's
-- digest (committed.rs `digest`). Returns the key's own value when it is
-- there (`p:...` pending, `c:<hook id>` committed in the old layout), else
-- `c:<hook id>` when the event is committed in the compact layout (any
-- series of the tenant), else "".
local held = redis.call('GET', KEYS[1])
if held then
  return held
end
local tag = string.match(KEYS[1], '^(ankusa:{[^}]*}):claim:')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local digest = string.gsub(ARGV[1], '..', function(h)
  return string.char(tonumber(h, 16))
end)
local seen = {}
for _, k in ipairs(redis.call('KEYS', tag .. ':committed:*')) do
  local ttl = string.match(k, ':committed:(%d+):')
  if ttl and not seen[ttl] then
    seen[ttl] = true
    local hook = committed_find(tag .. ':committed:' .. ttl, tonumber(ttl), digest, now)
    if hook then
      return 'c:' .. hook
    end
  end
end
return ''
