-- Deletes a pending claim only while this hook holds it.
-- KEYS[1]: the claim key; ARGV[1]: "p:<hook_id>:" (hook ids hold no ':').
local held = redis.call('GET', KEYS[1])
if held and string.sub(held, 1, string.len(ARGV[1])) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
