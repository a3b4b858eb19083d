/**
 * The Lua scripts a Redis node runs, each one atomic step. Tokens never pass
 * through a Lua number (a double, exact only to 2^53): counters are read back
 * with GET as strings, and compared as digit strings, by length then
 * lexicographically (tokens are non-negative integers without leading zeros).
 */

/**
 * KEYS: lock, counter, minted. ARGV: owner, ttlMs, tokenBase, tokenBase + 1. Returns the new token as
 * a digit string, or nil when held. Three calls per grant (SET, INCR, GET), one per denial: the
 * server's cost of a script grows with its calls. A counter at 2^63-1 makes INCR fail: the lock just
 * set is deleted again (a script error does not undo writes), so nothing is written. A fresh counter
 * starts at the base (INCR of a missing key starts at 0, the default base). INCR's reply is a Lua
 * number (a double): only whether it failed is read, the token is read back with GET, so it never
 * passes through a double.
 *
 * The first token of a resource (tokenBase + 1: the counter was missing) also sets the `minted`
 * marker (one more call, once per resource). A first token while the marker is there means the
 * counter was deleted (or set back to the base) behind lockcheck: minting would hand out tokens
 * already issued (FENCE-1), so the script undoes the lock and the counter and replies TOKENLOST.
 */
export const ACQUIRE = `
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end
if ARGV[3] ~= '0' then redis.call('SET', KEYS[2], ARGV[3], 'NX') end
local incremented = redis.pcall('INCR', KEYS[2])
if type(incremented) == 'table' then
  redis.call('DEL', KEYS[1])
  if string.find(incremented.err, 'overflow', 1, true) then return redis.error_reply('TOKENOVERFLOW the token counter is at 2^63-1') end
  return incremented
end
local token = redis.call('GET', KEYS[2])
if token == ARGV[4] and not redis.call('SET', KEYS[3], '1', 'NX') then
  redis.call('DEL', KEYS[1], KEYS[2])
  return redis.error_reply('TOKENLOST the token counter ' .. KEYS[2] .. ' was deleted or set back to the base while ' .. KEYS[3] .. ' says tokens were issued: set the counter to at least the highest token issued, or delete both to start again on purpose')
end
return token
`;

/** KEYS: lock. ARGV: owner. Compare-and-delete; returns 1 if deleted. */
export const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/** KEYS: lock. ARGV: owner, ttlMs. Compare-and-extend; returns 1 if extended. */
export const EXTEND = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`;

const GREATER = `local function gt(a, b) return #a > #b or (#a == #b and a > b) end`;

/** KEYS: counter. ARGV: token, tokenBase. Raises the counter to at least the token. */
export const RAISE = `
${GREATER}
local current = redis.call('GET', KEYS[1]) or ARGV[2]
if gt(ARGV[1], current) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
`;

/**
 * KEYS: cell (a hash: value, token, highest). ARGV: token, value, policy.
 * One conditional write: strict rejects token <= highest, monotonic rejects
 * token < highest, unfenced accepts. Returns {1} or {0, highest}.
 */
export const FENCED_WRITE = `
${GREATER}
local highest = redis.call('HGET', KEYS[1], 'highest')
if highest then
  if ARGV[3] == 'strict' and not gt(ARGV[1], highest) then return {0, highest} end
  if ARGV[3] == 'monotonic' and gt(highest, ARGV[1]) then return {0, highest} end
end
redis.call('HSET', KEYS[1], 'value', ARGV[2], 'token', ARGV[1])
if not highest or gt(ARGV[1], highest) then redis.call('HSET', KEYS[1], 'highest', ARGV[1]) end
return {1}
`;
