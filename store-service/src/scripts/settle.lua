-- Settles a claim only while the caller's hook holds it pending: a promote
-- commits it, a release deletes it. One key, so it runs on any Cluster node.
-- KEYS[1]: the claim key; ARGV[1]: "p:<claim.hook_id>:" (hook ids hold no ':');
-- ARGV[2]: "promote" or "release"; a promote's ARGV[3]: "c:<hook_id>" (the
-- hook id the upstream answered with) and ARGV[4]: its TTL in ms.
-- Returns "ok" when the claim moved, else why nothing changed: "free" (no
-- claim: never taken, or its pending TTL ran out), "committed" (already
-- committed, by this hook's earlier settle or another's), "other_hook"
-- (pending under another hook).
local held = redis.call('GET', KEYS[1])
if not held then
  return 'free'
end
if string.sub(held, 1, string.len(ARGV[1])) ~= ARGV[1] then
  if string.sub(held, 1, 2) == 'c:' then
    return 'committed'
  end
  return 'other_hook'
end
if ARGV[2] == 'promote' then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
else
  redis.call('DEL', KEYS[1])
end
return 'ok'
