-- One hook's charges and claims in one round trip (preceded by gcra.lua).
-- KEYS[1..n]: bucket keys; KEYS[n+1]: the tenant's override key; KEYS[n+2..]:
-- the claim keys, none to two (the event key's, then the replay guard's
-- body claim).
-- ARGV[1] = n; ARGV[3i-1], ARGV[3i], ARGV[3i+1] = units, rate, burst of
-- bucket i; then, per claim key in order: hook_id, node, pending_ttl_ms; then,
-- per claim key in order, its compact lookup's series, ttl_ms and digest
-- (claims.lua, prepended); then, per claim key in order, the partitions its
-- lookup reads as the store named them: its partition and four counters
-- (committed.rs `partitions_sent`).
-- A claim committed anywhere, in either layout, answers 'duplicate' with its
-- hook id (the first such in KEYS order); otherwise one pending answers
-- 'pending' with the longest time left; only when every claim is free are
-- they all written (pending, in the claim's own key).
-- A bucket's value is "stamp_us:level" (see gcra.lua).
-- A fleet override in force (JSON, see core/src/fleet/overrides.rs) replaces the
-- rate and burst of the pairs it sets: the store holds the authoritative
-- quota, so a changed limit holds fleet-wide before any edge learns it. Its
-- text is appended to every reply, for the edge to learn it.
-- An admit answers {'ok', levels}: each bucket's level after this charge
-- (millionths of a unit, at the script's TIME), comma-separated in KEYS
-- order, so the edge's RateLimit headers tell the exact standing.
-- Order matters: a taken claim spends nothing, a denied charge spends nothing.
local n = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local claims = #KEYS - n - 1
-- Every string the hit may read, in one MGET: the buckets, the override,
-- the claim keys (KEYS order), then each claim's partition counters.
local names, spans = {}, {}
for i = 1, #KEYS do
  names[i] = KEYS[i]
end
for c = 1, claims do
  local at = 3 * n + 3 * claims + 3 * c - 1
  local first, span = committed_spans_sent(names, ARGV[at], tonumber(ARGV[at + 1]), math.floor(now / 1000), ARGV,
    3 * n + 6 * claims + 5 * c - 3)
  spans[c] = {first, span}
end
local values = redis.call('MGET', unpack(names))
local override = values[n + 1]

local function reply(r)
  if override then
    r[#r + 1] = override
  end
  return r
end

local rates, bursts = {}, {}
for i = 1, n do
  rates[i], bursts[i] = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
end
if override then
  local ok, o = pcall(cjson.decode, override)
  if ok and type(o) == 'table' then
    for i = 1, n do
      local kind = string.match(KEYS[i], ':rl:(%a+)$')
      if kind == 'hooks' and type(o.rate) == 'number' and type(o.burst) == 'number' then
        rates[i], bursts[i] = o.rate, o.burst
      elseif kind == 'bytes' and type(o.bytes_rate) == 'number' and type(o.bytes_burst) == 'number' then
        rates[i], bursts[i] = o.bytes_rate, o.bytes_burst
      end
    end
  end
end

local pending = 0
for c = 1, claims do
  local at = 3 * n + 3 * claims + 3 * c - 1
  local state, value = claim_state(KEYS[n + 1 + c], values[n + 1 + c], names, values, spans[c][1], spans[c][2],
    ARGV[at + 2])
  if state == 'duplicate' then
    return reply({'duplicate', value})
  end
  if state == 'pending' and value > pending then
    pending = value
  end
end
if pending > 0 then
  return reply({'pending', pending})
end

-- The longest a bucket is kept: the longest ttl_ms a claim may have
-- (core/src/limit/limits.rs TTL_MS, 30 days).
local MAX_BUCKET_TTL_MS = 2592000000

-- Writes a bucket that is empty `ceil(level / rate)` µs after its stamp; the
-- key expires then (an absent key and an empty bucket admit alike), or after
-- MAX_BUCKET_TTL_MS if that is sooner: a quota whose full bucket drains
-- slower than that (a burst of 2^32 at 1 a second takes 136 years) forgets
-- its level 30 days after its last charge, rather than leaving a key that
-- outlives every other.
local function store_bucket(key, stamp, level, rate)
  local ttl_ms = math.ceil((stamp + ceil_div(level, rate) - now) / 1000)
  if ttl_ms < 1 then
    ttl_ms = 1
  end
  if ttl_ms > MAX_BUCKET_TTL_MS then
    ttl_ms = MAX_BUCKET_TTL_MS
  end
  redis.call('SET', key, string.format('%d:%d', stamp, level), 'PX', string.format('%d', ttl_ms))
end

local stamps, levels, restamps = {}, {}, {}
local wait = 0
for i = 1, n do
  local stored = values[i]
  local stamp, level = nil, nil
  if stored then
    local s, l = string.match(stored, '^(%d+):(%d+)$')
    stamp, level = tonumber(s), tonumber(l)
  end
  local admitted, a, b = gcra_check(stamp, level, now, tonumber(ARGV[3 * i - 1]), rates[i], bursts[i])
  if admitted then
    stamps[i], levels[i] = a, b
  else
    if a > wait then
      wait = a
    end
    restamps[i] = b
  end
end
if wait > 0 then
  for i = 1, n do
    if restamps[i] then
      store_bucket(KEYS[i], now, restamps[i], rates[i])
    end
  end
  return reply({'rate_limited', string.format('%d', wait)})
end

local after = {}
for i = 1, n do
  store_bucket(KEYS[i], stamps[i], levels[i], rates[i])
  after[i] = string.format('%d', levels[i])
end
for c = 1, claims do
  local at = 3 * n + 3 * c - 1
  redis.call('SET', KEYS[n + 1 + c], 'p:' .. ARGV[at] .. ':' .. ARGV[at + 1], 'PX', ARGV[at + 2])
end
return reply({'ok', table.concat(after, ',')})
