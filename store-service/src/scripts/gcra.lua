-- GCRA on one bucket, the arithmetic of core/src/gcra.rs `check`.
-- tat: the stored TAT in µs, or nil when the bucket was never charged (or expired).
-- Returns (true, new_tat) on admit, (false, wait_us) on deny.
-- Lua numbers are doubles: exact for every integer below 2^53, which the
-- service enforces on increment and capacity before calling.
local function gcra_check(tat, now, increment, capacity)
  local base = now
  if tat and tat > now then
    base = tat
  end
  local new_tat = base + increment
  local allow_at = new_tat - capacity
  if allow_at <= now then
    return true, new_tat
  end
  return false, allow_at - now
end
