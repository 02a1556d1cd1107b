-- Claims: the old layout's key per claim, and the compact layout of
-- committed claims (store-service/src/committed.rs). Prepended to the hit
-- script and to the settle script.
-- Compact: series S = "ankusa:{t}:committed:<ttl_ms>", partitions of
-- P = ceil(ttl_ms / 2) ms; partition p (commits in [p*P, (p+1)*P)) is a
-- counter "S:p", its events "S:p:n" and bucket hashes "S:p:b" (field:
-- 14-byte digest, value: 16-byte hook id, or its text, after "=" when 16
-- characters long), all expiring at (p+1)*P + ttl_ms. The counter addresses
-- the buckets: ceil(count / COMMITTED_FILL) of them, by the digest's first
-- 32 bits; it starts at the previous partition's events and grows by linear
-- hashing with the events past that (committed_part). Every bucket holds
-- the placeholder field "" from its creation, so it is never emptied, and a
-- bucket is never written without its partition's expiry.
local COMMITTED_FILL = 40
local DIGEST_LEN = 14

local function committed_hash(digest)
  local a, b, c, d = string.byte(digest, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function committed_buckets(count)
  local b = math.ceil(count / COMMITTED_FILL)
  if b < 1 then
    b = 1
  end
  return b
end

-- The largest power of two <= n (n >= 1, a whole number below 2^53):
-- frexp gives n = m * 2^e with 0.5 <= m < 1, exactly.
local function committed_top(n)
  local _, e = math.frexp(n)
  return 2 ^ (e - 1)
end

-- The bucket of hash h among `buckets`; `top` is committed_top(buckets),
-- passed when the caller has it.
local function committed_bucket(h, buckets, top)
  top = top or committed_top(buckets)
  local a = h % (top * 2)
  if a >= buckets then
    a = h % top
  end
  return a
end

-- n is a whole number below 2^53 (a partition's or a bucket's index).
-- '%d' writes it as an integer: concatenating the number would format it as
-- a double ('%.14g'), which costs about twice as much.
local function committed_name(base, n)
  return string.format('%s:%d', base, n)
end

local function hook_text(v)
  if #v == 16 then
    local hex = string.gsub(v, '.', function(ch)
      return string.format('%02x', string.byte(ch))
    end)
    return string.sub(hex, 1, 8) .. '-' .. string.sub(hex, 9, 12) .. '-' .. string.sub(hex, 13, 16)
      .. '-' .. string.sub(hex, 17, 20) .. '-' .. string.sub(hex, 21, 32)
  end
  return (string.gsub(v, '^=+', ''))
end

-- The partitions that may still hold an event committed under series
-- (one ahead, for a clock that stepped back), their counters' names appended
-- to `names` (for one MGET with the caller's other reads); returns where
-- they start in `names` and how many.
local function committed_spans(names, series, ttl, now_ms)
  local part = math.ceil(ttl / 2)
  local p = math.floor(now_ms / part) + 1
  local first = #names + 1
  while (p + 1) * part + ttl >= now_ms do
    names[#names + 1] = committed_name(series, p)
    p = p - 1
  end
  return first, #names - first + 1
end

-- committed_spans from the names the store sent (committed.rs
-- `partitions_sent`): args[at] is the partition p of the store's clock, then
-- the counters of p + 1, p, p - 1 and p - 2, what committed_spans lists
-- when Redis's clock is in p too and partition p - 3 has expired (all but
-- the first ms of p). Otherwise (the two clocks a partition apart, or that
-- first ms) the names are built here.
local function committed_spans_sent(names, series, ttl, now_ms, args, at)
  local part = math.ceil(ttl / 2)
  local p = math.floor(now_ms / part)
  if tonumber(args[at]) ~= p or (p - 2) * part + ttl >= now_ms then
    return committed_spans(names, series, ttl, now_ms)
  end
  local first = #names + 1
  names[first], names[first + 1], names[first + 2], names[first + 3] =
    args[at + 1], args[at + 2], args[at + 3], args[at + 4]
  return first, 4
end

-- The hook id an event is committed under in the compact layout, or nil,
-- from the partitions' counters read (values[first .. first + span - 1] for
-- names[...]): one HGET per live partition.
local function committed_match(names, values, first, span, digest)
  local h = committed_hash(digest)
  for i = first, first + span - 1 do
    local count = tonumber(values[i])
    if count then
      local v = redis.call('HGET', committed_name(names[i], committed_bucket(h, committed_buckets(count))), digest)
      if v then
        return hook_text(v)
      end
    end
  end
  return nil
end

-- committed_match on its own: the counters in one MGET, then one HGET per
-- live partition.
local function committed_find(series, ttl, digest, now_ms)
  local names = {}
  local first, span = committed_spans(names, series, ttl, now_ms)
  return committed_match(names, redis.call('MGET', unpack(names)), first, span, digest)
end

-- The partition a batch of commits at now_ms writes to, read once per batch
-- (a script runs alone, so its counts are kept here and written back by
-- committed_flush): parts[series] = {base, expires, count, entries, written,
-- buckets, top}. `count` is what the counter "S:p" holds, the number its
-- buckets are addressed by; `entries` ("S:p:n") the events written to it
-- (a counter of the previous release has none: it counts its events). A
-- partition's first commit sizes it for as many events as the partition
-- before it holds (count starts there), so a steady flow of commits fills it
-- without a split; past that it grows by linear hashing (count = entries).
-- `buckets` and `top` are those of count, kept with it.
local function committed_part(parts, series, ttl, now_ms)
  local part = parts[series]
  if not part then
    local len = math.ceil(ttl / 2)
    local p = math.floor(now_ms / len)
    local base = committed_name(series, p)
    local held = redis.call('MGET', base, base .. ':n')
    local count = tonumber(held[1]) or 0
    local entries = tonumber(held[2]) or count
    if count == 0 then
      local before = committed_name(series, p - 1)
      local was = redis.call('MGET', before, before .. ':n')
      count = tonumber(was[2]) or tonumber(was[1]) or 0
    end
    local buckets = committed_buckets(count)
    part = {base = base, expires = (p + 1) * len + ttl, count = count, entries = entries, written = entries,
      buckets = buckets, top = committed_top(buckets)}
    parts[series] = part
  end
  return part
end

-- Commits an event in the compact layout, in the partition of now_ms. A
-- bucket is created by its first write ("" and the entry, 2 new fields),
-- which sets its expiry.
local function committed_add(parts, series, ttl, digest, value, now_ms)
  local part = committed_part(parts, series, ttl, now_ms)
  local base, expires = part.base, part.expires
  part.entries = part.entries + 1
  if part.entries > part.count then
    part.count = part.entries
  end
  local after = committed_buckets(part.count)
  if after > part.buckets then
    -- Linear hashing: bucket j takes from bucket j - top the entries it now addresses.
    local top = committed_top(after)
    part.buckets, part.top = after, top
    local j = after - 1
    local from = committed_name(base, j - committed_top(j))
    local to = committed_name(base, j)
    local fields = redis.call('HGETALL', from)
    local moved, gone = {'', ''}, {}
    for i = 1, #fields, 2 do
      local f = fields[i]
      if #f == DIGEST_LEN and committed_bucket(committed_hash(f), after, top) == j then
        moved[#moved + 1] = f
        moved[#moved + 1] = fields[i + 1]
        gone[#gone + 1] = f
      end
    end
    if #gone > 0 then
      redis.call('HDEL', from, unpack(gone))
    end
    redis.call('HSET', to, unpack(moved))
    redis.call('PEXPIREAT', to, expires)
  end
  local bucket = committed_name(base, committed_bucket(committed_hash(digest), after, part.top))
  if redis.call('HSET', bucket, '', '', digest, value) == 2 then
    redis.call('PEXPIREAT', bucket, expires)
  end
end

-- Writes back the counts of the partitions a batch committed to, each
-- expiring with its buckets.
local function committed_flush(parts)
  for _, part in pairs(parts) do
    if part.entries ~= part.written then
      redis.call('SET', part.base, part.count, 'PXAT', part.expires)
      redis.call('SET', part.base .. ':n', part.entries, 'PXAT', part.expires)
      part.written = part.entries
    end
  end
end

-- A claim's state before a hit, from what its key holds (`held`, read by the
-- caller) and its compact lookup (committed_match's arguments): 'duplicate'
-- and the hook id (committed in either layout), 'pending' and the ms left,
-- or 'free'.
local function claim_state(key, held, names, values, first, span, digest)
  if held then
    if string.sub(held, 1, 2) == 'c:' then
      return 'duplicate', string.sub(held, 3)
    end
    local left = redis.call('PTTL', key)
    if left < 1 then
      left = 1
    end
    return 'pending', left
  end
  local hook = committed_match(names, values, first, span, digest)
  if hook then
    return 'duplicate', hook
  end
  return 'free', 0
end
