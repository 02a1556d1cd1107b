-- Releases a pending claim an operator names (POST /v1/claims/release), only
-- while it still holds exactly that pending value: the same hook and node.
-- KEYS[1]: the claim key; ARGV[1]: "p:<hook_id>:<node>".
-- Returns 1 when the claim was deleted, 0 when it held anything else (gone,
-- committed, pending under another hook or node, or not a string).
if redis.call('TYPE', KEYS[1]).ok ~= 'string' then
  return 0
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
