-- ARGV: since (version held, 0 for none), epoch of it ('' unchecked), limit.
-- Returns {gap 0|1, the answer's JSON}: an OverridePage (ankusa_core::
-- overrides::page) built around the stored overrides' JSON as it is. Tenant
-- names ([A-Za-z0-9_.-]) and the epoch (digits) need no escaping.
local e = epoch()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Expired overrides become deletions, at most SWEEP_MAX a call (an edge
-- ignores an expired override it still holds).
local expired = redis.call('ZRANGEBYSCORE', EXP, '-inf', now, 'LIMIT', 0, SWEEP_MAX)
for _, tenant in ipairs(expired) do
  forget(tenant)
end
trim()
local version = tonumber(redis.call('HGET', META, 'version') or '0')
local floor = tonumber(redis.call('HGET', META, 'floor') or '0')
local total = redis.call('HLEN', DATA)
local since = tonumber(ARGV[1])
local function answer(next, gap, more, overrides, deleted)
  local body = '{"epoch":"' .. e .. '","version":' .. string.format('%d', next)
  if gap then
    body = body .. ',"gap":true'
  end
  if more then
    body = body .. ',"more":true'
  end
  local gone = '[]'
  if #deleted > 0 then
    gone = '["' .. table.concat(deleted, '","') .. '"]'
  end
  body = body .. ',"overrides":[' .. table.concat(overrides, ',') .. '],"deleted":' .. gone
    .. ',"total":' .. string.format('%d', total) .. '}'
  local g = 0
  if gap then
    g = 1
  end
  return {g, body}
end
if since > 0 and ((ARGV[2] ~= '' and ARGV[2] ~= e) or since > version or since < floor) then
  return answer(version, true, false, {}, {})
end
local limit = tonumber(ARGV[3])
local page = redis.call('ZRANGEBYSCORE', LOG, '(' .. ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, limit + 1)
local n = #page / 2
local more = n > limit
if more then
  n = limit
end
local tenants = {}
for i = 1, n do
  tenants[i] = page[2 * i - 1]
end
local overrides, deleted = {}, {}
if n > 0 then
  local values = redis.call('HMGET', DATA, unpack(tenants))
  for i = 1, n do
    if values[i] then
      overrides[#overrides + 1] = values[i]
    else
      deleted[#deleted + 1] = tenants[i]
    end
  end
end
local next = version
if more then
  next = tonumber(page[2 * n])
end
return answer(next, false, more, overrides, deleted)
