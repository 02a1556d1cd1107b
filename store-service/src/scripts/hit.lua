-- One hook's charges and claim in one round trip (preceded by gcra.lua).
-- KEYS[1..n]: bucket keys; KEYS[n+1]: the claim key, when there is a claim.
-- ARGV[1] = n; ARGV[2i], ARGV[2i+1] = increment_us, capacity_us of bucket i;
-- then, with a claim: hook_id, node, pending_ttl_ms.
-- Order matters: a taken claim spends nothing, a denied charge writes nothing.
local n = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local claim_key = KEYS[n + 1]

if claim_key then
  local held = redis.call('GET', claim_key)
  if held then
    if string.sub(held, 1, 2) == 'c:' then
      return {'duplicate', string.sub(held, 3)}
    end
    local left = redis.call('PTTL', claim_key)
    if left < 1 then
      left = 1
    end
    return {'pending', left}
  end
end

local tats = {}
local wait = 0
for i = 1, n do
  local stored = redis.call('GET', KEYS[i])
  local tat = nil
  if stored then
    tat = tonumber(stored)
  end
  local admitted, value = gcra_check(tat, now, tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1]))
  if admitted then
    tats[i] = value
  elseif value > wait then
    wait = value
  end
end
if wait > 0 then
  return {'rate_limited', string.format('%.0f', wait)}
end

for i = 1, n do
  -- The bucket is forgotten once its TAT passes: an absent key and a TAT in
  -- the past admit alike.
  local ttl_ms = math.ceil((tats[i] - now) / 1000)
  if ttl_ms < 1 then
    ttl_ms = 1
  end
  redis.call('SET', KEYS[i], string.format('%.0f', tats[i]), 'PX', ttl_ms)
end
if claim_key then
  local at = 2 * n + 2
  redis.call('SET', claim_key, 'p:' .. ARGV[at] .. ':' .. ARGV[at + 1], 'PX', ARGV[at + 2])
end
return {'ok'}
