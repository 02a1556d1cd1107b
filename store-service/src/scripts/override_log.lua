-- The override change log: every PUT, DELETE and expiry of an override
-- takes the next version; one slot (KEYS share a hash tag).
-- KEYS: meta (hash epoch/version/floor), data (hash tenant -> JSON),
-- log (zset tenant by version of its last change), gone (zset: deleted
-- tenants still in log, by version), exp (zset tenant by expiry, unix ms).
local META, DATA, LOG, GONE, EXP = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

-- The log's epoch, named from Redis's clock when the log is first made: a
-- flushed or replaced Redis starts another. The log starts at version 1, so
-- a caller that read it holds a version other than 0 (0: none, list all).
local function epoch()
  local e = redis.call('HGET', META, 'epoch')
  if not e then
    local t = redis.call('TIME')
    e = t[1] .. string.format('%06d', tonumber(t[2]))
    redis.call('HSET', META, 'epoch', e)
    redis.call('HSETNX', META, 'version', 1)
  end
  return e
end

local function bump()
  return redis.call('HINCRBY', META, 'version', 1)
end

-- A tenant's override goes (deleted or expired): a change like any other.
local function forget(tenant)
  local v = bump()
  redis.call('HDEL', DATA, tenant)
  redis.call('ZREM', EXP, tenant)
  redis.call('ZADD', LOG, v, tenant)
  redis.call('ZADD', GONE, v, tenant)
end

-- At most GONE_MAX deletions are remembered; the oldest beyond are
-- forgotten and `floor` rises to the newest forgotten: a caller holding an
-- older version is told it has a gap.
local function trim()
  local over = redis.call('ZCARD', GONE) - GONE_MAX
  if over > 0 then
    local old = redis.call('ZPOPMIN', GONE, over)
    local floor = tonumber(redis.call('HGET', META, 'floor') or '0')
    for i = 1, #old, 2 do
      redis.call('ZREM', LOG, old[i])
      floor = math.max(floor, tonumber(old[i + 1]))
    end
    redis.call('HSET', META, 'floor', floor)
  end
end
