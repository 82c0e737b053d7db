-- The token bucket as the seed guide builds it in Lua, kept as the baseline
-- that RL.TOKENBUCKET is measured and checked against (tests, make bench).
-- KEYS[1] key; ARGV: capacity, tokens per second, now (Unix seconds), n.
-- Returns {allowed, floor(tokens left)}.
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local n = tonumber(ARGV[4])

local stored = redis.call("HMGET", KEYS[1], "tokens", "last_updated")
local tokens = tonumber(stored[1])
if tokens == nil then
    tokens = capacity
else
    local elapsed = math.max(0, now - tonumber(stored[2]))
    tokens = math.min(capacity, tokens + elapsed * rate)
end

local allowed = 0
if tokens >= n then
    tokens = tokens - n
    allowed = 1
end
redis.call("HMSET", KEYS[1], "tokens", tokens, "last_updated", now)
if allowed == 1 then
    redis.call("EXPIRE", KEYS[1], math.ceil(capacity / rate) * 2)
end
return {allowed, math.floor(tokens)}
