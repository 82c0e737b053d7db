#!lua name=ratelimit_floor
-- make instructions' floor rows (scripts/instructions.sh): functions that
-- make only the Redis calls a script-mode command makes, and return a reply
-- of its shape, with no Lua work between. What they cost in call() is what
-- any script with that call's shape costs at least.

-- RL.TOKENBUCKET on a warm key: the clock, the state, the state written
-- back with its expiry; the five fields.
redis.register_function('floor_limit', function(keys)
    redis.call('TIME')
    redis.pcall('GET', keys[1])
    redis.call('SET', keys[1], 'rl1:tb:999999000000000000:1700000000000000', 'PX', '1000000000')
    return { 1, 999999, 1000000, 0, 1000000000 }
end)

-- The same with `now` given: no TIME.
redis.register_function('floor_limit_now_given', function(keys)
    redis.pcall('GET', keys[1])
    redis.call('SET', keys[1], 'rl1:tb:999999000000000000:1700000000000000', 'PX', '1000000000')
    return { 1, 999999, 1000000, 0, 1000000000 }
end)

-- RL.MULTI of two limits: one clock, two states read and written, the
-- nested reply.
redis.register_function('floor_multi', function(keys)
    redis.call('TIME')
    redis.pcall('GET', keys[1])
    redis.pcall('GET', keys[2])
    redis.call('SET', keys[1], 'rl1:tb:999999000000000000:1700000000000000', 'PX', '1000000000')
    redis.call('SET', keys[2], 'rl1:fw:1700000000000000:1', 'PX', '1000000000')
    return { 1, 0, { 1, 999999, 1000000, 0, 1000000000 }, { 1, 999999, 1000000, 0, 1000000000 } }
end)

-- A long sliding log's take where no run has left: this version's calls
-- (the whole log read, the new run appended), and those of the layout the
-- next version writes (docs/script-mode.md: the head read and updated in
-- place, the run appended), which cost the same at any length.
redis.register_function('floor_log', function(keys)
    redis.call('TIME')
    redis.pcall('GET', keys[1])
    redis.call('APPEND', keys[1], ',1000:1')
    redis.call('PEXPIRE', keys[1], '1000000000')
    return { 1, 999999, 1000000, 0, 1000000000 }
end)

redis.register_function('floor_log_next', function(keys)
    redis.call('TIME')
    redis.pcall('GETRANGE', keys[1], 0, 127)
    redis.call('SETRANGE', keys[1], 7, '0000000000000301:001700000000299000')
    redis.call('APPEND', keys[1], ',1000:1')
    redis.call('PEXPIRE', keys[1], '1000000000')
    return { 1, 999999, 1000000, 0, 1000000000 }
end)

-- A counter, the calls of the scripts that keep one (a fixed window that
-- counts every hit, with the window's time left): PTTL, INCR, two fields.
redis.register_function('floor_counter', function(keys)
    local ttl = redis.call('PTTL', keys[1])
    return { redis.call('INCR', keys[1]), ttl }
end)
