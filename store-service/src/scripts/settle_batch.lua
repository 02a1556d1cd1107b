-- Settles a batch of claims of one tenant (one hash tag, so one Cluster
-- slot) in one call, each only while the caller's hook holds it pending: a
-- promote commits it, a release deletes it. Preceded by claims.lua.
-- KEYS[i]: op i's claim key. ARGV[1]: "compact" or "dual" (the store's
-- --committed-layout). Then 7 per op i, from ARGV[7i-5]: "p:<claim.hook_id>:"
-- (hook ids hold no ':'), "promote" or "release", then for a promote the
-- series, ttl_ms and digest of its compact entry (claims.lua), the hook id
-- the upstream answered with as stored (16 bytes, or its text) and as text
-- (a release carries the same series, ttl_ms and digest, and "" for both).
-- A promote writes the compact entry and deletes the pending key; under
-- "dual" it also leaves the old layout's "c:<hook_id>" in the key, with
-- ttl_ms, for stores of 0.2.0 that read only that.
-- Returns, per op, "ok" when the claim moved, else why nothing changed:
-- "free" (no claim: never taken, or its pending TTL ran out), "committed"
-- (already committed, by this hook's earlier settle or another's),
-- "other_hook" (pending under another hook).
local dual = ARGV[1] == 'dual'
local now_ms = nil
local function clock()
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now_ms
end
local out = {}
local parts = {}
-- Every claim key in one MGET, the deletions in one DEL at the end:
-- `holds` is what each key holds as the batch goes (a key may come twice).
local holds, gone = {}, {}
local values = redis.call('MGET', unpack(KEYS))
for i = 1, #KEYS do
  holds[KEYS[i]] = values[i]
end
for i = 1, #KEYS do
  local at = 7 * i - 5
  local prefix = ARGV[at]
  local held = holds[KEYS[i]]
  if not held then
    out[i] = 'free'
    -- A promote sent again (after a redirect or a lost answer), or a
    -- release of a stored hook, finds the entry committed in the compact layout.
    -- (The counts this batch changed are written first: a lookup addresses
    -- buckets by them.)
    committed_flush(parts)
    parts = {}
    if committed_find(ARGV[at + 2], tonumber(ARGV[at + 3]), ARGV[at + 4], clock()) then
      out[i] = 'committed'
    end
  elseif string.sub(held, 1, string.len(prefix)) ~= prefix then
    if string.sub(held, 1, 2) == 'c:' then
      out[i] = 'committed'
    else
      out[i] = 'other_hook'
    end
  elseif ARGV[at + 1] == 'promote' then
    local ttl = tonumber(ARGV[at + 3])
    committed_add(parts, ARGV[at + 2], ttl, ARGV[at + 4], ARGV[at + 5], clock())
    if dual then
      holds[KEYS[i]] = 'c:' .. ARGV[at + 6]
      redis.call('SET', KEYS[i], holds[KEYS[i]], 'PX', ttl)
    else
      holds[KEYS[i]] = false
      gone[#gone + 1] = KEYS[i]
    end
    out[i] = 'ok'
  else
    holds[KEYS[i]] = false
    gone[#gone + 1] = KEYS[i]
    out[i] = 'ok'
  end
end
if #gone > 0 then
  redis.call('DEL', unpack(gone))
end
committed_flush(parts)
-- BEGIN unproven commits (issue 35; store-service/src/commits.rs). After
-- the 1 + 7 * #KEYS arguments above, 2 per promote applied without a
-- verified receipt: its op's index i, and its node's index series
-- "ankusa:{t}:unproven:<node>:<ttl_ms>". Each that committed here ('ok') is
-- recorded in that series' hash for the minute it committed in, field its
-- digest, value "<commit ms>:<hook id>:<source>:<event key>", expiring with
-- the partition it committed to (or a later one's, written since). A
-- proven promote carries none: nothing is written.
for j = 2 + 7 * #KEYS, #ARGV, 2 do
  local i = tonumber(ARGV[j])
  if out[i] == 'ok' then
    local at = 7 * i - 5
    local ttl = tonumber(ARGV[at + 3])
    local len = math.ceil(ttl / 2)
    local p = math.floor(clock() / len)
    local index = committed_name(ARGV[j + 1], math.floor(clock() / 60000))
    local event = string.match(KEYS[i], '^ankusa:{[^}]*}:claim:(.*)$')
    redis.call('HSET', index, ARGV[at + 4],
      string.format('%.0f', clock()) .. ':' .. ARGV[at + 6] .. ':' .. event)
    redis.call('PEXPIREAT', index, string.format('%.0f', (p + 1) * len + ttl))
  end
end
-- END unproven commits
return out
