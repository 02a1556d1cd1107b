-- GCRA on one bucket, the arithmetic of core/src/limit/gcra.rs `check`.
-- A bucket is stamp (µs) and level (micro-units: units x 10^6), draining
-- `rate` micro-units per µs; stored as "stamp:level". Lua numbers are doubles:
-- exact for every integer below 2^53, which the core's bounds (rate <= 10^9,
-- burst <= 2^32) keep every value here below.
-- Returns (true, stamp, level) on admit; (false, wait_us, restamp_level) on
-- deny, where restamp_level is set when the stamp was stale (more than 1 s
-- ahead: the clock stepped back): write (now, restamp_level) back so the
-- bucket drains from now, spending nothing.
local MICRO = 1000000
local MAX_LEAD_US = 1000000

-- ceil(a / b) for integers 0 <= a < 2^53, 1 <= b, exactly (a double
-- division alone can round across an integer).
local function ceil_div(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  while r < 0 do
    q = q - 1
    r = r + b
  end
  while r >= b do
    q = q + 1
    r = r - b
  end
  if r > 0 then
    q = q + 1
  end
  return q
end

local function gcra_check(stamp, level, now, units, rate, burst)
  local cap = burst * MICRO
  stamp = stamp or 0
  level = level or 0
  if level > cap then
    level = cap
  end
  local lead = stamp - now
  if lead > MAX_LEAD_US then
    local ok, a, b = gcra_check(now, level, now, units, rate, burst)
    if ok then
      return ok, a, b
    end
    return false, a, level
  end
  local base, elapsed = now, now - stamp
  if lead > 0 then
    base, elapsed = stamp, 0
  end
  local drained = 0
  if elapsed < ceil_div(level, rate) then
    drained = level - elapsed * rate
  end
  local need = drained + units * MICRO
  if need <= cap then
    return true, base, need
  end
  return false, (base - now) + ceil_div(need - cap, rate), nil
end
