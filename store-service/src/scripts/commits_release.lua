-- Removes an unproven commit an operator names (POST /v1/commits/release;
-- store-service/src/commits.rs), only while the node's index still lists it
-- under that hook id and its event is still committed under it. Preceded by
-- claims.lua.
-- KEYS[1]: the index hash "ankusa:{t}:unproven:<node>:<ttl_ms>:<minute>";
-- KEYS[2]: the event's key of the old layout (written under "dual").
-- ARGV[1]: the series "ankusa:{t}:committed:<ttl_ms>"; ARGV[2]: the
-- partition p it was committed to; ARGV[3]: the event's digest; ARGV[4]:
-- the hook id.
-- Returns 1 when the commit was removed (the compact entry, and the old
-- layout's "c:<hook id>" if there), 0 when nothing changed: not listed
-- (gone, or another hook's), or committed under another hook id.
local listed = redis.call('HGET', KEYS[1], ARGV[3])
if not listed or string.match(listed, '^%d+:([^:]*):') ~= ARGV[4] then
  return 0
end
local removed = 0
local base = committed_name(ARGV[1], tonumber(ARGV[2]))
local count = tonumber(redis.call('GET', base))
if count then
  local bucket = committed_name(base, committed_bucket(committed_hash(ARGV[3]), committed_buckets(count)))
  local held = redis.call('HGET', bucket, ARGV[3])
  if held and hook_text(held) == ARGV[4] then
    redis.call('HDEL', bucket, ARGV[3])
    removed = 1
  end
end
if redis.call('TYPE', KEYS[2]).ok == 'string' and redis.call('GET', KEYS[2]) == 'c:' .. ARGV[4] then
  redis.call('DEL', KEYS[2])
  removed = 1
end
if removed == 1 then
  redis.call('HDEL', KEYS[1], ARGV[3])
end
return removed
