-- redis-ratelimit, script mode: the module's commands for a Redis or Valkey
-- without the module (managed services), in one script.
--
--   EVALSHA <sha1> <numkeys> <key...> <COMMAND> <args...>
--
-- KEYS are the module command's keys in its order; ARGV[1] is the module
-- command's name (any case): RL.TOKENBUCKET, RL.LEAKYBUCKET, RL.FIXEDWINDOW,
-- RL.SLIDINGWINDOW, RL.SLIDINGLOG, RL.MULTI, RL.PEEK, RL.REFUND, and the
-- concurrency limits' RL.ACQUIRE, RL.RELEASE, RL.RENEW (CONCURRENCY in
-- RL.MULTI and RL.PEEK too; RL.REFUND refuses it, as the module does);
-- ARGV[2..] are its own arguments without the keys (and, for RL.MULTI,
-- numkeys). The reply is the module's, field for field; errors are its
-- error strings.
-- `now` = `*` reads the server's clock (TIME). Uses nothing of the Lua API
-- newer than Redis 6.2's.
--
-- Exactness: Lua has only doubles. Numbers below 2^53 are plain Lua numbers;
-- larger ones (a bucket's pico-units, times after 2255, windows and rates at
-- the top of their ranges) are arrays of base-10^7 limbs, least significant
-- first. Every helper below returns a plain number whenever the value is
-- below 2^53, so the common case never builds a table.
--
-- State: a plain Redis string, version 1, fields in decimal, times in Unix
-- microseconds, amounts of the buckets in pico-units (10^-12 of a unit):
--
--   rl1:tb:<tokens>:<last_us>                 token bucket
--   rl1:lb:<level>:<last_us>                  leaky bucket
--   rl1:fw:<last_us>:<count>                  fixed window
--   rl1:sw:<last_us>:<previous>:<current>     sliding window counter
--   rl1:sl:<t1>:<c1>,<d2>:<c2>,...            sliding log: runs oldest
--                                             first, the first at time t1,
--                                             each next one d microseconds
--                                             after the one before, c units
--   rl1:cc:<last_us>:<next_id>:<id>:<end_us>:<n>,<id>:<end_us>:<n>,...
--                                             concurrency: the next lease
--                                             id, then the leases in the
--                                             order taken (ascending ids),
--                                             each ending at end_us,
--                                             holding n slots
--
-- The meaning of each field is the module's (docs/commands.md, RL.SETSTATE).
-- The key expires when the limiter is fresh again (PTTL = reset_after_ms);
-- a fresh limiter is no key. A value is checked when read: a string that is
-- not a state of this algorithm is WRONGTYPE, a damaged one an ERR, and a
-- key of the module's own type an error that names both modes.
--
-- This file: general() holds the exact code of every command (its COMMANDS
-- table dispatches by name: a new command is one more entry there). Redis
-- runs a script's whole text on every call, so general() is only built
-- when a call needs it; before it, FAST holds the single-key commands in
-- plain doubles, each taken only when every value it meets stays below
-- 2^53 and returning nil (nothing read changed, nothing written) otherwise.
--
-- As a function library (Redis 7+, Valkey): the clients load this text
-- with FUNCTION LOAD after two lines,
--
--   #!lua name=ratelimit_<v>
--   local RATELIMIT_FUNCTION = 'ratelimit_<v>'
--
-- (<v>: the first 12 hex digits of the SHA1 of this file, its EVALSHA sha)
-- and call FCALL ratelimit_<v> <numkeys> <keys...> <COMMAND> <args...>,
-- the same arguments as EVALSHA.

-- The whole library, built when a call needs it (see the end of the file).
local function library()
    -- The server's clock in Unix microseconds, read once per call.
    local server_time
    local function server_now()
        if not server_time then
            -- Writes after TIME are replicated by their effects (Redis 6.2 may
            -- be set to replicate scripts verbatim; 7 and later always do this).
            if redis.replicate_commands then
                redis.replicate_commands()
            end
            local t = redis.call('TIME')
            server_time = tonumber(t[1]) * 1000000 + tonumber(t[2])
        end
        return server_time
    end

    -- Every command, exactly, on any value in the module's ranges. Built only
    -- when a call needs it: Redis runs the whole script on every call, and
    -- defining all of this costs more than a token bucket's whole fast path.
    local function general(KEYS, ARGV)
        local floor, fmod, max = math.floor, math.fmod, math.max
        local find, sub_str, format = string.find, string.sub, string.format
        local concat = table.concat

        -- Errors, worded as the module's (src/error.rs).
        local E = {
            capacity = 'ERR capacity must be an integer from 1 to 9007199254740991',
            rate = 'ERR rate must be a decimal number of units per second from 0.000001 to 1000000000000',
            fill = 'ERR capacity / rate must be at most 1000000000000 seconds (the time to refill or drain the whole bucket)',
            limit = 'ERR limit must be an integer from 1 to 9007199254740991',
            window = 'ERR window must be a decimal number of seconds from 0.001 to 1000000000000',
            now = 'ERR now must be * or a decimal Unix time in seconds from 0 to 253402300799.999999',
            count = 'ERR n must be an integer from 0 to 9007199254740991',
            algorithm = 'ERR algorithm must be TOKENBUCKET, LEAKYBUCKET, FIXEDWINDOW, SLIDINGWINDOW, SLIDINGLOG or CONCURRENCY',
            lease = 'ERR lease must be a decimal number of seconds from 0.001 to 1000000000000',
            lease_id = 'ERR lease_id must be an integer from 0 to 9007199254740991',
            refund_concurrency = 'ERR a concurrency limit takes no refund: release its lease with RL.RELEASE',
            numkeys = 'ERR numkeys must be an integer from 1 to 1000',
            repeated = 'ERR a key may appear only once',
            wrongtype = 'WRONGTYPE Operation against a key holding the wrong kind of value',
            module_key = 'WRONGTYPE the key holds module-mode state (the redis-ratelimit module\'s type); '
                .. 'script mode cannot use it: give each mode its own key prefix',
            -- Lua returns integers exactly only below 2^53: a reply past that (a
            -- leaky bucket whose stored queue is far longer than the call's
            -- capacity drains at its slow rate) is refused, with nothing changed.
            reply_range = 'ERR rate is too slow for the queue this key holds: a reply would pass 9007199254740991 ms, '
                .. 'beyond what script mode returns exactly (the module returns it); nothing was changed',
            corrupt = 'ERR the key holds a damaged script-mode state (rl1:...): script mode did not write it; '
                .. 'it is left unchanged',
        }

        local function arity(command)
            return 'ERR wrong number of arguments for \'' .. command .. '\' command'
        end

        -- A failure: unwound with error() and turned into an error reply at the top.
        local Failure = {}
        local function fail(message)
            error(setmetatable({ message = message }, Failure), 0)
        end

        -- Wide integers --------------------------------------------------------------

        local BASE = 10000000 -- limbs of 7 decimal digits: products stay below 2^53
        local TWO53 = 9007199254740992
        local TWO52 = 4503599627370496

        -- The limbs of x (a number below 2^53, or limbs already).
        local function limbs(x)
            if type(x) == 'table' then
                return x
            end
            local t, i = {}, 0
            repeat
                local r = fmod(x, BASE) -- fmod is exact; floor(x / BASE) may not be
                i = i + 1
                t[i] = r
                x = (x - r) / BASE
            until x == 0
            return t
        end

        -- Limbs made canonical: no leading zero limbs, and a plain number when the
        -- value is below 2^53.
        local function norm(t)
            local n = #t
            while n > 1 and t[n] == 0 do
                t[n] = nil
                n = n - 1
            end
            if n <= 3 then
                local v = 0
                for i = n, 1, -1 do
                    v = v * BASE + t[i]
                end
                if v < TWO53 then
                    return v
                end
            end
            return t
        end

        local function add(a, b)
            if type(a) == 'number' and type(b) == 'number' then
                local s = a + b
                if s < TWO53 then
                    return s
                end
            end
            a, b = limbs(a), limbs(b)
            local t, carry = {}, 0
            for i = 1, max(#a, #b) do
                local s = (a[i] or 0) + (b[i] or 0) + carry
                if s >= BASE then
                    t[i], carry = s - BASE, 1
                else
                    t[i], carry = s, 0
                end
            end
            if carry > 0 then
                t[#t + 1] = carry
            end
            return norm(t)
        end

        -- a - b, for a >= b.
        local function sub(a, b)
            if type(a) == 'number' and type(b) == 'number' then
                return a - b
            end
            a, b = limbs(a), limbs(b)
            local t, borrow = {}, 0
            for i = 1, #a do
                local s = a[i] - (b[i] or 0) - borrow
                if s < 0 then
                    t[i], borrow = s + BASE, 1
                else
                    t[i], borrow = s, 0
                end
            end
            return norm(t)
        end

        local function mul(a, b)
            if type(a) == 'number' and type(b) == 'number' then
                local p = a * b
                if p < TWO53 then
                    return p
                end
            end
            a, b = limbs(a), limbs(b)
            local na, nb, t = #a, #b, {}
            for i = 1, na + nb do
                t[i] = 0
            end
            for i = 1, na do
                local ai, carry = a[i], 0
                if ai ~= 0 then
                    for j = 1, nb do
                        local s = t[i + j - 1] + ai * b[j] + carry
                        local r = fmod(s, BASE)
                        t[i + j - 1], carry = r, (s - r) / BASE
                    end
                    local k = i + nb
                    while carry > 0 do
                        local s = t[k] + carry
                        local r = fmod(s, BASE)
                        t[k], carry = r, (s - r) / BASE
                        k = k + 1
                    end
                end
            end
            return norm(t)
        end

        -- -1, 0 or 1. A plain number is below 2^53, limbs are not.
        local function cmp(a, b)
            local ta, tb = type(a) == 'table', type(b) == 'table'
            if not ta and not tb then
                return a < b and -1 or (a > b and 1 or 0)
            end
            if not ta then
                return -1
            end
            if not tb then
                return 1
            end
            if #a ~= #b then
                return #a < #b and -1 or 1
            end
            for i = #a, 1, -1 do
                if a[i] ~= b[i] then
                    return a[i] < b[i] and -1 or 1
                end
            end
            return 0
        end

        local function lt(a, b)
            if type(a) == 'number' and type(b) == 'number' then
                return a < b
            end
            return cmp(a, b) < 0
        end

        local function eq(a, b)
            if type(a) == 'number' and type(b) == 'number' then
                return a == b
            end
            return cmp(a, b) == 0
        end

        local function bigger(a, b)
            return lt(a, b) and b or a
        end

        -- a - b, at least 0.
        local function saturating_sub(a, b)
            return lt(a, b) and 0 or sub(a, b)
        end

        local function approx(x)
            if type(x) == 'number' then
                return x
            end
            local v = 0
            for i = #x, 1, -1 do
                v = v * BASE + x[i]
            end
            return v
        end

        -- x * BASE^k
        local function shift(x, k)
            if k == 0 then
                return x
            end
            local l, t = limbs(x), {}
            for i = 1, k do
                t[i] = 0
            end
            for i = 1, #l do
                t[k + i] = l[i]
            end
            return norm(t)
        end

        -- floor(a / b) and a mod b, b > 0. Wide: each step takes a quotient
        -- estimated from doubles, shrunk so that it never overshoots, exactly.
        local function divmod(a, b)
            if type(a) == 'number' and type(b) == 'number' then
                local r = fmod(a, b)
                return (a - r) / b, r
            end
            local q, r, db = 0, a, approx(b)
            while cmp(r, b) >= 0 do
                local estimate, k = approx(r) / db * (1 - 1e-12), 0
                while estimate >= TWO52 do
                    estimate, k = estimate / BASE, k + 1
                end
                estimate = floor(estimate) - 1
                if estimate < 1 then
                    estimate = 1
                end
                r = sub(r, shift(mul(b, estimate), k))
                q = add(q, shift(estimate, k))
            end
            return q, r
        end

        local function ceil_div(a, b)
            local q, r = divmod(a, b)
            if r ~= 0 then
                q = add(q, 1)
            end
            return q
        end

        -- A string of decimal digits as a number or limbs.
        local function from_decimal(s)
            local first = find(s, '[^0]')
            if not first then
                return 0
            end
            if first > 1 then
                s = sub_str(s, first)
            end
            local n = #s
            if n <= 15 or (n == 16 and s <= '9007199254740991') then
                return tonumber(s)
            end
            local t, k = {}, 0
            for j = n, 1, -7 do
                k = k + 1
                t[k] = tonumber(sub_str(s, j > 7 and j - 6 or 1, j))
            end
            return norm(t)
        end

        local function to_decimal(x)
            if type(x) == 'number' then
                return format('%d', x)
            end
            local parts = { format('%d', x[#x]) }
            for i = #x - 1, 1, -1 do
                parts[#parts + 1] = format('%07d', x[i])
            end
            return concat(parts)
        end

        -- Constants and argument parsing (src/args.rs) -------------------------------

        local MAX_UNITS = 9007199254740991
        local PICO = 1000000000000 -- pico-units per unit
        local MAX_SPAN_US = from_decimal('1000000000000000000') -- 10^12 s
        local MAX_RATE_MICROS = MAX_SPAN_US -- 10^12 units/s in micro-units/s
        local MAX_TIME_US = from_decimal('253402300799999999') -- 9999-12-31T23:59:59.999999Z

        -- A non-negative integer of plain ASCII digits, up to 20 of them (the
        -- module's u64 parser; anything past u64 is past every range anyway).
        local function integer(s)
            if #s > 20 or not find(s, '^[0-9]+$') then
                return nil
            end
            return from_decimal(s)
        end

        -- A non-negative decimal in millionths, rounded half up at the seventh
        -- decimal: `12`, `0.5`, `.25`, `3.`.
        local function micros(s)
            local _, _, whole, fraction = find(s, '^([0-9]*)%.?([0-9]*)$')
            if not whole or (whole == '' and fraction == '') or #whole > 20 then
                return nil
            end
            if find(s, '.', 1, true) == nil and fraction ~= '' then
                return nil -- digits only, no dot: all of it is the whole part
            end
            local six = sub_str(fraction .. '000000', 1, 6)
            local value = from_decimal(whole .. six)
            if sub_str(fraction, 7, 7) >= '5' then
                value = add(value, 1)
            end
            return value
        end

        local function in_range(x, low, high)
            return x ~= nil and not lt(x, low) and not lt(high, x)
        end

        local BUCKET = { TOKENBUCKET = 'tb', LEAKYBUCKET = 'lb' }
        local ALGORITHMS = {
            TOKENBUCKET = 'tb',
            LEAKYBUCKET = 'lb',
            FIXEDWINDOW = 'fw',
            SLIDINGWINDOW = 'sw',
            SLIDINGLOG = 'sl',
            CONCURRENCY = 'cc',
        }

        -- A limit: its algorithm's code, `size` (capacity or limit) and `per`
        -- (refill in pico-units per microsecond, or the window or the lease in
        -- microseconds).
        local function parse_limit(algorithm, a, b)
            local size = integer(a)
            local ok_size = in_range(size, 1, MAX_UNITS)
            if BUCKET[algorithm] then
                if not ok_size then
                    fail(E.capacity)
                end
                local rate = micros(b)
                if not in_range(rate, 1, MAX_RATE_MICROS) then
                    fail(E.rate)
                end
                local full = mul(size, PICO)
                if lt(mul(MAX_SPAN_US, rate), full) then
                    fail(E.fill)
                end
                return { code = BUCKET[algorithm], size = size, per = rate, full = full, rate_ms = mul(rate, 1000) }
            end
            if not ok_size then
                fail(E.limit)
            end
            local window = micros(b)
            if not in_range(window, 1000, MAX_SPAN_US) then
                fail(algorithm == 'CONCURRENCY' and E.lease or E.window)
            end
            return { code = ALGORITHMS[algorithm], size = size, per = window }
        end

        local function parse_spec(name, a, b)
            local algorithm = string.upper(name)
            if not ALGORITHMS[algorithm] then
                fail(E.algorithm)
            end
            return parse_limit(algorithm, a, b)
        end

        -- `*` (the server's clock: false) or microseconds.
        local function parse_now(s)
            if s == '*' then
                return false
            end
            local us = micros(s)
            if us == nil or lt(MAX_TIME_US, us) then
                fail(E.now)
            end
            return us
        end

        local function parse_count(s)
            if s == nil then
                return 1
            end
            local n = integer(s)
            if n == nil or lt(MAX_UNITS, n) then
                fail(E.count)
            end
            return n
        end


        -- Verdicts (src/algorithms/mod.rs) ------------------------------------------

        local function verdict(allowed, remaining, retry, reset, store)
            return { allowed = allowed, remaining = remaining, retry = retry, reset = reset, store = store }
        end
        local function never(remaining, reset)
            return verdict(false, remaining, -1, reset)
        end
        local function denied(remaining, retry, reset)
            return verdict(false, remaining, retry, reset)
        end
        local function admitted(remaining, reset, store)
            return verdict(true, remaining, 0, reset, store)
        end

        local function ms_between(from, to)
            return ceil_div(saturating_sub(to, from), 1000)
        end

        -- Buckets (src/algorithms/token_bucket.rs, leaky_bucket.rs) ------------------

        local function whole_units(pico)
            return (divmod(pico, PICO))
        end

        local function ms_for(p, pico)
            return ceil_div(pico, p.rate_ms)
        end

        -- Pico-units flowing between `from` and `to`.
        local function flow(p, from, to)
            return mul(sub(to, from), p.per)
        end

        local function token_refill(state, now, p)
            if not state then
                return p.full, now
            end
            now = bigger(now, state.last)
            local tokens = add(state.amount, flow(p, state.last, now))
            if lt(p.full, tokens) then
                tokens = p.full
            end
            return tokens, now
        end

        local token_bucket = {}

        function token_bucket.take(state, now, p, n)
            local tokens, last = token_refill(state, now, p)
            local full = p.full
            if n > p.size then
                return never(whole_units(tokens), ms_for(p, sub(full, tokens)))
            end
            local wanted = mul(n, PICO)
            if lt(tokens, wanted) then
                return denied(whole_units(tokens), ms_for(p, sub(wanted, tokens)), ms_for(p, sub(full, tokens)))
            end
            local left = sub(tokens, wanted)
            local store = n > 0 and { amount = left, last = last } or nil
            return admitted(whole_units(left), ms_for(p, sub(full, left)), store)
        end

        function token_bucket.refund(state, now, p, n)
            local tokens, last = token_refill(state, now, p)
            local full = p.full
            tokens = add(tokens, mul(n, PICO))
            if lt(full, tokens) then
                tokens = full
            end
            local store = (state and n > 0) and { amount = tokens, last = last } or nil
            return admitted(whole_units(tokens), ms_for(p, sub(full, tokens)), store)
        end

        local function leaky_drain(state, now, p)
            if not state then
                return 0, now
            end
            now = bigger(now, state.last)
            return saturating_sub(state.amount, flow(p, state.last, now)), now
        end

        local function free_units(p, level)
            return whole_units(saturating_sub(p.full, level))
        end

        local leaky_bucket = {}

        function leaky_bucket.take(state, now, p, n)
            local level, last = leaky_drain(state, now, p)
            local v
            if n > p.size then
                v = never(free_units(p, level), ms_for(p, level))
                v.delay = 0
                return v
            end
            local queued = add(level, mul(n, PICO))
            if lt(p.full, queued) then
                v = denied(free_units(p, level), ms_for(p, sub(queued, p.full)), ms_for(p, level))
                v.delay = 0
                return v
            end
            local store = n > 0 and { amount = queued, last = last } or nil
            v = admitted(free_units(p, queued), ms_for(p, queued), store)
            v.delay = ms_for(p, level)
            return v
        end

        function leaky_bucket.refund(state, now, p, n)
            local level, last = leaky_drain(state, now, p)
            level = saturating_sub(level, mul(n, PICO))
            local store = (state and n > 0) and { amount = level, last = last } or nil
            local v = admitted(free_units(p, level), ms_for(p, level), store)
            v.delay = ms_for(p, level)
            return v
        end

        -- Windows (src/algorithms/fixed_window.rs, sliding_window.rs) ---------------

        local function window_start(t, w)
            local _, r = divmod(t, w)
            return sub(t, r)
        end

        local function fixed_current(state, now, w)
            if not state then
                return { last = now, count = 0 }
            end
            now = bigger(now, state.last)
            local same = eq(window_start(state.last, w), window_start(now, w))
            return { last = now, count = same and state.count or 0 }
        end

        local function fixed_reset(s, w)
            if s.count == 0 then
                return 0
            end
            return ms_between(s.last, add(window_start(s.last, w), w))
        end

        local fixed_window = {}

        function fixed_window.take(state, now, p, n)
            local w, limit = p.per, p.size
            local cur = fixed_current(state, now, w)
            local remaining = max(limit - cur.count, 0)
            if n > limit then
                return never(remaining, fixed_reset(cur, w))
            end
            if cur.count > limit - n then
                local to_end = fixed_reset(cur, w)
                return denied(remaining, to_end, to_end)
            end
            local after = { last = cur.last, count = cur.count + n }
            return admitted(limit - after.count, fixed_reset(after, w), n > 0 and after or nil)
        end

        function fixed_window.refund(state, now, p, n)
            local w = p.per
            local cur = fixed_current(state, now, w)
            local after = { last = cur.last, count = max(cur.count - n, 0) }
            local store = (state and n > 0) and after or nil
            return admitted(max(p.size - after.count, 0), fixed_reset(after, w), store)
        end

        local function sliding_at(state, now, w)
            if not state then
                return { last = now, previous = 0, current = 0 }
            end
            now = bigger(now, state.last)
            local start, last_start = window_start(now, w), window_start(state.last, w)
            if eq(last_start, start) then
                return { last = now, previous = state.previous, current = state.current }
            elseif eq(add(last_start, w), start) then
                return { last = now, previous = state.current, current = 0 }
            end
            return { last = now, previous = 0, current = 0 }
        end

        -- estimate * window, with `extra` more units in the current window.
        local function scaled_estimate(s, w, extra)
            local elapsed = sub(s.last, window_start(s.last, w))
            return add(mul(s.previous, sub(w, elapsed)), mul(add(s.current, extra), w))
        end

        local function sliding_remaining(s, w, limit)
            local room = saturating_sub(mul(limit, w), scaled_estimate(s, w, 0))
            return (divmod(room, w))
        end

        -- Microseconds until `n <= limit` more units fit (sliding_window.rs).
        local function sliding_wait(s, w, limit, n)
            local elapsed = sub(s.last, window_start(s.last, w))
            local to_edge = sub(w, elapsed)
            if limit - s.current >= n then
                local slack = limit - s.current - n
                local excess = saturating_sub(mul(s.previous, to_edge), mul(slack, w))
                local wait = ceil_div(excess, max(s.previous, 1))
                if lt(wait, to_edge) then
                    return wait
                end
            end
            local excess = saturating_sub(mul(s.current, w), mul(limit - n, w))
            return add(to_edge, ceil_div(excess, max(s.current, 1)))
        end

        local function sliding_reset(s, w)
            if s.previous == 0 and s.current == 0 then
                return 0
            end
            local window_end = add(window_start(s.last, w), w)
            if s.current == 0 then
                return ms_between(s.last, window_end)
            end
            return ms_between(s.last, add(window_end, w))
        end

        local sliding_window = {}

        function sliding_window.take(state, now, p, n)
            local w, limit = p.per, p.size
            local s = sliding_at(state, now, w)
            if n > limit then
                return never(sliding_remaining(s, w, limit), sliding_reset(s, w))
            end
            if lt(mul(limit, w), scaled_estimate(s, w, n)) then
                local retry = ceil_div(sliding_wait(s, w, limit, n), 1000)
                return denied(sliding_remaining(s, w, limit), retry, sliding_reset(s, w))
            end
            local after = { last = s.last, previous = s.previous, current = s.current + n }
            return admitted(sliding_remaining(after, w, limit), sliding_reset(after, w), n > 0 and after or nil)
        end

        function sliding_window.refund(state, now, p, n)
            local w = p.per
            local s = sliding_at(state, now, w)
            local from_current = math.min(n, s.current)
            local after = {
                last = s.last,
                previous = max(s.previous - (n - from_current), 0),
                current = s.current - from_current,
            }
            local store = (state and n > 0) and after or nil
            return admitted(sliding_remaining(after, w, p.size), sliding_reset(after, w), store)
        end

        -- Sliding log (src/algorithms/sliding_log.rs) --------------------------------
        -- A log: runs oldest first, `times[i]` (absolute) and `counts[i]`, their
        -- `total`, and `last`, the newest run's time (0 when empty).

        local EMPTY_LOG = { times = {}, counts = {}, total = 0, last = 0 }

        local function units_before(log, cutoff)
            local units, times, counts = 0, log.times, log.counts
            for i = 1, #times do
                if not lt(times[i], cutoff) then
                    break
                end
                units = units + counts[i]
            end
            return units
        end

        -- The time, cutoff and units still in the window at `now`.
        local function log_live(log, now, w)
            now = bigger(now, log.last)
            local cutoff = saturating_sub(add(now, 1), w)
            return now, cutoff, log.total - units_before(log, cutoff)
        end

        local function leaves_at(now, at, w)
            return ms_between(now, add(at, w))
        end

        -- The time of the unit that leaves the window k-th, of those at or after
        -- the cutoff.
        local function kth_live(log, cutoff, k)
            local seen, times, counts = 0, log.times, log.counts
            for i = 1, #times do
                if not lt(times[i], cutoff) then
                    seen = seen + counts[i]
                    if seen >= k then
                        return times[i]
                    end
                end
            end
            return nil
        end

        local sliding_log = {}

        function sliding_log.take(log, now, p, n)
            log = log or EMPTY_LOG
            local w, limit = p.per, p.size
            local cutoff, count
            now, cutoff, count = log_live(log, now, w)
            local reset = count == 0 and 0 or leaves_at(now, log.last, w)
            local remaining = max(limit - count, 0)
            if n > limit then
                return never(remaining, reset)
            end
            if count > limit - n then
                local at = kth_live(log, cutoff, count - (limit - n))
                return denied(remaining, at and leaves_at(now, at, w) or reset, reset)
            end
            if n > 0 then
                reset = leaves_at(now, now, w)
            end
            local store = n > 0 and { append = true, cutoff = cutoff, at = now, count = n } or nil
            return admitted(remaining - n, reset, store)
        end

        function sliding_log.refund(log, now, p, n)
            if not log then
                return admitted(p.size, 0, nil)
            end
            local w = p.per
            local cutoff, count
            now, cutoff, count = log_live(log, now, w)
            local left = max(count - n, 0)
            local reset = 0
            if left > 0 then
                reset = leaves_at(now, kth_live(log, cutoff, left), w)
            end
            local store = n > 0 and { append = false, cutoff = cutoff, count = n } or nil
            return admitted(max(p.size - left, 0), reset, store)
        end

        -- The log after a change: runs before the cutoff dropped, then `count`
        -- units logged at `at`, or the `count` newest taken out.
        local function log_changed(log, change)
            local times, counts, kept, total = {}, {}, 0, 0
            for i = 1, #log.times do
                if not lt(log.times[i], change.cutoff) then
                    kept = kept + 1
                    times[kept], counts[kept] = log.times[i], log.counts[i]
                    total = total + log.counts[i]
                end
            end
            if change.append then
                kept = kept + 1
                times[kept], counts[kept] = change.at, change.count
                total = total + change.count
            else
                local keep = max(total - change.count, 0)
                local k = 0
                total = keep
                while keep > 0 do
                    k = k + 1
                    if counts[k] > keep then
                        counts[k] = keep
                    end
                    keep = keep - counts[k]
                end
                for i = k + 1, kept do
                    times[i], counts[i] = nil, nil
                end
                kept = k
            end
            return { times = times, counts = counts, total = total, last = kept > 0 and times[kept] or 0 }
        end

        -- Concurrency (src/algorithms/concurrency.rs) --------------------------------
        -- Leases: `last`, the last update; `next_id`, the id the next lease
        -- gets; `held`, the leases in the order taken (ascending ids), each
        -- { id, ends (Unix microseconds), n (slots) }. A lease that ends at E
        -- holds its slots while t < E. No lease left is no key: ids start again
        -- at 1.

        local MAX_ID = MAX_UNITS
        local NO_LEASES = { last = 0, next_id = 1, held = {} }

        -- Slots held at `now`, and milliseconds until every live lease but
        -- lease `except` has run out.
        local function leases_at(leases, now, except)
            local held, reset = 0, 0
            for _, lease in ipairs(leases.held) do
                if lt(now, lease.ends) then
                    held = held + lease.n
                    if lease.id ~= except then
                        reset = bigger(reset, ms_between(now, lease.ends))
                    end
                end
            end
            return held, reset
        end

        local function live_lease(leases, now, id)
            for _, lease in ipairs(leases.held) do
                if lt(now, lease.ends) and eq(lease.id, id) then
                    return lease
                end
            end
            return nil
        end

        local concurrency = {}

        -- RL.ACQUIRE: `n` slots under a new lease when at most `limit` are then
        -- held; the verdict's `lease` is its id (0: none taken).
        function concurrency.take(leases, now, p, n)
            leases = leases or NO_LEASES
            now = bigger(now, leases.last)
            local limit = p.size
            local held, reset = leases_at(leases, now)
            local remaining = max(limit - held, 0)
            local v
            if n > limit then
                v = never(remaining, reset)
            elseif held > limit - n then
                -- Wait for the leases that run out first until n fit.
                local ends = {}
                for _, lease in ipairs(leases.held) do
                    if lt(now, lease.ends) then
                        ends[#ends + 1] = lease
                    end
                end
                table.sort(ends, function(a, b)
                    return lt(a.ends, b.ends)
                end)
                local must_free, freed, retry = held - (limit - n), 0, reset
                for _, lease in ipairs(ends) do
                    freed = freed + lease.n
                    if freed >= must_free then
                        retry = ms_between(now, lease.ends)
                        break
                    end
                end
                v = denied(remaining, retry, reset)
            else
                local next_id = held == 0 and 1 or leases.next_id
                if n > 0 and lt(MAX_ID, next_id) then
                    -- Every id was given out: they start again once no lease is left.
                    v = denied(remaining, reset, reset)
                elseif n == 0 then
                    v = admitted(remaining, reset, nil)
                else
                    local ends = add(now, p.per)
                    local store = { op = 'acquire', at = now, id = next_id, ends = ends, n = n }
                    v = admitted(remaining - n, bigger(reset, ms_between(now, ends)), store)
                    v.lease = next_id
                end
            end
            v.lease = v.lease or 0
            return v
        end

        -- RL.RELEASE: frees lease `id` when it is still held at `now`.
        function concurrency.release(leases, now, id)
            leases = leases or NO_LEASES
            now = bigger(now, leases.last)
            local held, reset = leases_at(leases, now)
            local lease = live_lease(leases, now, id)
            if not lease then
                return { done = false, held = held, reset = reset }
            end
            local _, others = leases_at(leases, now, lease.id)
            return { done = true, held = held - lease.n, reset = others, store = { op = 'release', at = now, id = id } }
        end

        -- RL.RENEW: makes lease `id`, when still held at `now`, run out at
        -- `now + lease_us`.
        function concurrency.renew(leases, now, id, lease_us)
            leases = leases or NO_LEASES
            now = bigger(now, leases.last)
            local held, reset = leases_at(leases, now)
            local lease = live_lease(leases, now, id)
            if not lease then
                return { done = false, held = held, reset = reset }
            end
            local ends = add(now, lease_us)
            local _, others = leases_at(leases, now, lease.id)
            local store = { op = 'renew', at = now, id = id, ends = ends }
            return { done = true, held = held, reset = bigger(others, ms_between(now, ends)), store = store }
        end

        -- The leases after a change: those run out by its time dropped (the
        -- clock moved there, never back), then the lease added, freed or
        -- renewed.
        local function leases_changed(leases, change)
            leases = leases or NO_LEASES
            local at = bigger(change.at, leases.last)
            local held = {}
            for _, lease in ipairs(leases.held) do
                if lt(at, lease.ends) then
                    if change.op == 'renew' and eq(lease.id, change.id) then
                        lease = { id = lease.id, ends = change.ends, n = lease.n }
                    end
                    if not (change.op == 'release' and eq(lease.id, change.id)) then
                        held[#held + 1] = lease
                    end
                end
            end
            local next_id = #held == 0 and 1 or leases.next_id
            if change.op == 'acquire' then
                next_id = bigger(next_id, add(change.id, 1))
                held[#held + 1] = { id = change.id, ends = change.ends, n = change.n }
            end
            return { last = at, next_id = next_id, held = held }
        end

        -- Stored values ---------------------------------------------------------------

        local MODULES = {
            tb = token_bucket,
            lb = leaky_bucket,
            fw = fixed_window,
            sw = sliding_window,
            sl = sliding_log,
            cc = concurrency,
        }

        -- A stored field: digits with no leading zero.
        local function field(s)
            if s == nil or (#s > 1 and sub_str(s, 1, 1) == '0') then
                fail(E.corrupt)
            end
            return from_decimal(s)
        end

        local function stored_time(s)
            local t = field(s)
            if lt(MAX_TIME_US, t) then
                fail(E.corrupt)
            end
            return t
        end

        local function stored_units(s, low)
            local u = field(s)
            if lt(MAX_UNITS, u) or u < low then
                fail(E.corrupt)
            end
            return u
        end

        local MAX_PICO = mul(MAX_UNITS, PICO)

        local DECODE = {}

        function DECODE.tb(body)
            local _, _, amount, last = find(body, '^([0-9]+):([0-9]+)$')
            local tokens = field(amount)
            if lt(MAX_PICO, tokens) then
                fail(E.corrupt)
            end
            return { amount = tokens, last = stored_time(last) }
        end

        function DECODE.lb(body)
            local _, _, amount, last = find(body, '^([0-9]+):([0-9]+)$')
            local level = field(amount)
            if lt(MAX_PICO, level) or level == 0 then
                fail(E.corrupt)
            end
            return { amount = level, last = stored_time(last) }
        end

        function DECODE.fw(body)
            local _, _, last, count = find(body, '^([0-9]+):([0-9]+)$')
            return { last = stored_time(last), count = stored_units(count, 1) }
        end

        function DECODE.sw(body)
            local _, _, last, previous, current = find(body, '^([0-9]+):([0-9]+):([0-9]+)$')
            local s = { last = stored_time(last), previous = stored_units(previous, 0), current = stored_units(current, 0) }
            if s.previous + s.current == 0 then
                fail(E.corrupt)
            end
            return s
        end

        function DECODE.sl(body)
            local times, counts, total, position, at = {}, {}, 0, 1, 0
            local n, length = 0, #body
            while true do
                local _, stop, delta, count = find(body, '^([0-9]+):([0-9]+)', position)
                if not stop then
                    fail(E.corrupt)
                end
                at = add(at, field(delta))
                local units = stored_units(count, 1)
                total = total + units
                if total > MAX_UNITS or lt(MAX_TIME_US, at) then
                    fail(E.corrupt)
                end
                n = n + 1
                times[n], counts[n] = at, units
                if stop == length then
                    break
                end
                if sub_str(body, stop + 1, stop + 1) ~= ',' then
                    fail(E.corrupt)
                end
                position = stop + 2
            end
            return { times = times, counts = counts, total = total, last = at }
        end

        local ENCODE = {}

        function ENCODE.tb(s)
            return 'rl1:tb:' .. to_decimal(s.amount) .. ':' .. to_decimal(s.last)
        end
        function ENCODE.lb(s)
            return 'rl1:lb:' .. to_decimal(s.amount) .. ':' .. to_decimal(s.last)
        end
        function ENCODE.fw(s)
            return 'rl1:fw:' .. to_decimal(s.last) .. ':' .. format('%d', s.count)
        end
        function ENCODE.sw(s)
            return 'rl1:sw:' .. to_decimal(s.last) .. ':' .. format('%d', s.previous) .. ':' .. format('%d', s.current)
        end
        function ENCODE.sl(log)
            local parts, previous = {}, 0
            for i = 1, #log.times do
                parts[i] = to_decimal(sub(log.times[i], previous)) .. ':' .. format('%d', log.counts[i])
                previous = log.times[i]
            end
            return 'rl1:sl:' .. concat(parts, ',')
        end

        -- rl1:cc:<last_us>:<next_id>:<id>:<end_us>:<n>,<id>:<end_us>:<n>,...
        -- Only what a command could have stored: at least one lease, each live
        -- at the last update and for at most the longest lease after it, of at
        -- least 1 slot, 2^53 - 1 in all; ids rising from 1, below the next id,
        -- which is at most 2^53.
        function DECODE.cc(body)
            local _, stop, last_text, next_text = find(body, '^([0-9]+):([0-9]+):')
            if not stop then
                fail(E.corrupt)
            end
            local last, next_id = stored_time(last_text), field(next_text)
            local held, total, previous, length = {}, 0, 0, #body
            local position = stop + 1
            while true do
                local id, ends, count
                _, stop, id, ends, count = find(body, '^([0-9]+):([0-9]+):([0-9]+)', position)
                if not stop then
                    fail(E.corrupt)
                end
                id, ends, count = field(id), field(ends), stored_units(count, 1)
                total = total + count
                if not lt(previous, id) or not lt(last, ends) or lt(MAX_SPAN_US, sub(ends, last)) or total > MAX_UNITS then
                    fail(E.corrupt)
                end
                held[#held + 1] = { id = id, ends = ends, n = count }
                previous = id
                if stop == length then
                    break
                end
                if sub_str(body, stop + 1, stop + 1) ~= ',' then
                    fail(E.corrupt)
                end
                position = stop + 2
            end
            if not lt(previous, next_id) or lt(add(MAX_ID, 1), next_id) then
                fail(E.corrupt)
            end
            return { last = last, next_id = next_id, held = held }
        end

        function ENCODE.cc(leases)
            local parts = {}
            for i, lease in ipairs(leases.held) do
                parts[i] = to_decimal(lease.id) .. ':' .. to_decimal(lease.ends) .. ':' .. format('%d', lease.n)
            end
            return 'rl1:cc:' .. to_decimal(leases.last) .. ':' .. to_decimal(leases.next_id) .. ':' .. concat(parts, ',')
        end

        -- The state of `key` for algorithm `code`: nil for a missing key.
        local function read(key, code)
            local value = redis.pcall('GET', key)
            if value == false then
                return nil
            end
            if type(value) == 'table' then
                if redis.call('TYPE', key).ok == 'ratelimit' then
                    fail(E.module_key)
                end
                fail(E.wrongtype)
            end
            if sub_str(value, 1, 4) ~= 'rl1:' or sub_str(value, 5, 7) ~= code .. ':' then
                fail(E.wrongtype)
            end
            return DECODE[code](sub_str(value, 8))
        end

        -- Runs `op` ('take' or 'refund') of a limit on a key's state.
        local function run(limit, op, state, now, n)
            return MODULES[limit.code][op](state, now, limit, n)
        end

        -- Writes a verdict's change: the new state expiring at reset_after_ms, or
        -- no key when that leaves the limiter fresh.
        local function commit(key, limit, state, v)
            local change = v.store
            if not change then
                return
            end
            local code = limit.code
            if v.reset == 0 then
                redis.call('DEL', key)
                return
            end
            if code == 'sl' then
                change = log_changed(state or EMPTY_LOG, change)
            elseif code == 'cc' then
                change = leases_changed(state, change)
            end
            redis.call('SET', key, ENCODE[code](change), 'PX', to_decimal(v.reset))
        end

        -- Refuses a verdict whose reply Lua cannot return exactly.
        local function check_range(v)
            if type(v.retry) == 'table' or type(v.reset) == 'table' or type(v.delay) == 'table' then
                fail(E.reply_range)
            end
        end

        local function fields(limit, v)
            local f = { v.allowed and 1 or 0, v.remaining, limit.size, v.retry, v.reset }
            if limit.code == 'lb' then
                f[6] = v.delay
            elseif limit.code == 'cc' then
                f[6] = v.lease
            end
            return f
        end

        -- Commands ----------------------------------------------------------------------

        local COMMANDS = {}

        local function single(name, algorithm)
            COMMANDS[name] = function(keys, argv)
                if #keys ~= 1 or #argv < 4 then
                    fail(arity(name))
                end
                local limit = parse_limit(algorithm, argv[2], argv[3])
                local now = parse_now(argv[4])
                if #argv > 5 then
                    fail(arity(name))
                end
                local n = parse_count(argv[5])
                local state = read(keys[1], limit.code)
                local v = run(limit, 'take', state, now or server_now(), n)
                check_range(v)
                commit(keys[1], limit, state, v)
                return fields(limit, v)
            end
        end

        single('RL.TOKENBUCKET', 'TOKENBUCKET')
        single('RL.LEAKYBUCKET', 'LEAKYBUCKET')
        single('RL.FIXEDWINDOW', 'FIXEDWINDOW')
        single('RL.SLIDINGWINDOW', 'SLIDINGWINDOW')
        single('RL.SLIDINGLOG', 'SLIDINGLOG')
        single('RL.ACQUIRE', 'CONCURRENCY')

        -- RL.PEEK key ALGORITHM a b now [n]
        function COMMANDS.PEEK(keys, argv)
            if #keys ~= 1 or #argv < 5 then
                fail(arity('RL.PEEK'))
            end
            local limit = parse_spec(argv[2], argv[3], argv[4])
            local now = parse_now(argv[5])
            if #argv > 6 then
                fail(arity('RL.PEEK'))
            end
            local n = parse_count(argv[6])
            local state = read(keys[1], limit.code)
            local v = run(limit, 'take', state, now or server_now(), n)
            check_range(v)
            -- Nothing is taken, so no lease is held.
            v.lease = v.lease and 0
            return fields(limit, v)
        end

        -- RL.REFUND key ALGORITHM a b now n
        function COMMANDS.REFUND(keys, argv)
            if #keys ~= 1 or #argv ~= 6 then
                fail(arity('RL.REFUND'))
            end
            local limit = parse_spec(argv[2], argv[3], argv[4])
            local now = parse_now(argv[5])
            local n = parse_count(argv[6])
            if limit.code == 'cc' then
                fail(E.refund_concurrency) -- a slot comes back by its lease's id
            end
            local state = read(keys[1], limit.code)
            local v = run(limit, 'refund', state, now or server_now(), n)
            check_range(v)
            commit(keys[1], limit, state, v)
            return fields(limit, v)
        end

        -- RL.MULTI numkeys key [key ...] now ALGORITHM a b n [ALGORITHM a b n ...]
        function COMMANDS.MULTI(keys, argv)
            local k = #keys
            if 1 + k + #argv < 8 then
                fail(arity('RL.MULTI'))
            end
            -- At most 1000 keys, as the module: a call runs alone on the server.
            if k == 0 or k > 1000 then
                fail(E.numkeys)
            end
            if #argv ~= 2 + 4 * k then
                fail(arity('RL.MULTI'))
            end
            local limits, counts = {}, {}
            for i = 1, k do
                local at = 3 + 4 * (i - 1)
                limits[i] = parse_spec(argv[at], argv[at + 1], argv[at + 2])
                counts[i] = parse_count(argv[at + 3])
            end
            local now = parse_now(argv[2])
            local seen = {}
            for i = 1, k do
                if seen[keys[i]] then
                    fail(E.repeated)
                end
                seen[keys[i]] = true
            end
            now = now or server_now()
            local states, verdicts, allowed = {}, {}, true
            for i = 1, k do
                states[i] = read(keys[i], limits[i].code)
                verdicts[i] = run(limits[i], 'take', states[i], now, counts[i])
                allowed = allowed and verdicts[i].allowed
            end
            for i = 1, k do
                if not allowed and verdicts[i].allowed then
                    -- Nothing is taken: a limit that would admit reports its state
                    -- as a look (n = 0) does.
                    verdicts[i] = run(limits[i], 'take', states[i], now, 0)
                end
                check_range(verdicts[i])
            end
            local reply, retry = { allowed and 1 or 0, 0 }, 0
            for i = 1, k do
                if allowed then
                    commit(keys[i], limits[i], states[i], verdicts[i])
                end
                local wait = verdicts[i].retry
                if retry ~= -1 then
                    retry = (wait == -1) and -1 or bigger(retry, wait)
                end
                reply[2 + i] = fields(limits[i], verdicts[i])
            end
            if not allowed then
                reply[2] = retry
            end
            return reply
        end

        -- RL.RELEASE key lease_id now, RL.RENEW key lease_id lease now:
        -- `[released or renewed, held, reset_after_ms]`.
        local function parse_lease_id(s)
            local id = integer(s)
            if id == nil or lt(MAX_UNITS, id) then
                fail(E.lease_id)
            end
            return id
        end

        local function on_lease(key, now, call)
            local state = read(key, 'cc')
            local result = call(state, now or server_now())
            commit(key, { code = 'cc' }, state, result)
            return { result.done and 1 or 0, result.held, result.reset }
        end

        COMMANDS['RL.RELEASE'] = function(keys, argv)
            if #keys ~= 1 or #argv ~= 3 then
                fail(arity('RL.RELEASE'))
            end
            local id, now = parse_lease_id(argv[2]), parse_now(argv[3])
            return on_lease(keys[1], now, function(state, at)
                return concurrency.release(state, at, id)
            end)
        end

        COMMANDS['RL.RENEW'] = function(keys, argv)
            if #keys ~= 1 or #argv ~= 4 then
                fail(arity('RL.RENEW'))
            end
            local id, lease = parse_lease_id(argv[2]), micros(argv[3])
            if not in_range(lease, 1000, MAX_SPAN_US) then
                fail(E.lease)
            end
            local now = parse_now(argv[4])
            return on_lease(keys[1], now, function(state, at)
                return concurrency.renew(state, at, id, lease)
            end)
        end

        COMMANDS['RL.PEEK'], COMMANDS['RL.REFUND'], COMMANDS['RL.MULTI'] = COMMANDS.PEEK, COMMANDS.REFUND, COMMANDS.MULTI
        COMMANDS.PEEK, COMMANDS.REFUND, COMMANDS.MULTI = nil, nil, nil

        local command = COMMANDS[string.upper(ARGV[1] or '')]
        if not command then
            return redis.error_reply('ERR unknown command \'' .. tostring(ARGV[1]) .. '\' for redis-ratelimit script mode')
        end
        local ok, result = pcall(command, KEYS, ARGV)
        if ok then
            return result
        end
        if getmetatable(result) == Failure then
            return redis.error_reply(result.message)
        end
        error(result, 0)
    end

    -- The token bucket's fast path: the same math in plain doubles, taken
    -- only when every value it meets stays exact (below 2^53); anything else,
    -- bad input included, goes to general(). Tokens are split into whole units
    -- and a pico-unit fraction (< 10^12), as the stored decimal splits at its
    -- twelfth digit from the right.

    local find, tonumber, fmod, format = string.find, tonumber, math.fmod, string.format
    local TWO52, TWO53, PICO = 4503599627370496, 9007199254740992, 1000000000000
    local SCALE = { 100000, 10000, 1000, 100, 10, 1 }

    -- A decimal of at most `digits` whole digits and 6 decimals, in millionths.
    local function plain_micros(s, digits)
        local _, _, whole, fraction = find(s, '^([0-9]+)%.?([0-9]*)$')
        if not whole or #whole > digits or #fraction > 6 then
            return nil
        end
        local us = tonumber(whole) * 1000000
        if fraction ~= '' then
            us = us + tonumber(fraction) * SCALE[#fraction]
        end
        return us
    end

    -- ceil((units * 10^12 + pico) / per_ms), 0 <= pico < 10^12, when every
    -- step is exact and the result below 2^52; else nil.
    local function plain_ms(per_ms, units, pico)
        local rest = fmod(PICO, per_ms)
        local whole = units * ((PICO - rest) / per_ms)
        local excess = units * rest
        if whole >= TWO52 or excess >= TWO52 then
            return nil
        end
        excess = excess + pico
        local r = fmod(excess, per_ms)
        return whole + (excess - r) / per_ms + (r > 0 and 1 or 0)
    end

    -- units * 10^12 - pico as (units, pico) with 0 <= pico < 10^12.
    local function minus(units, pico)
        if pico > 0 then
            return units - 1, PICO - pico
        end
        return units, 0
    end

    -- ceil(us / 1000)
    local function ceil_ms(us)
        local r = fmod(us, 1000)
        return (us - r) / 1000 + (r > 0 and 1 or 0)
    end

    -- A stored time: canonical digits below 2^53.
    local function plain_time(s)
        if not s or #s > 16 or find(s, '^0.') then
            return nil
        end
        local t = tonumber(s)
        return t < TWO53 and t or nil
    end

    -- A stored count: canonical digits below 10^15, 0 only when `zero`.
    local function plain_count(s, zero)
        if not s or #s > 15 or find(s, zero and '^0.' or '^0') then
            return nil
        end
        return tonumber(s)
    end

    -- A stored bucket amount in pico-units as (units, pico), or nil.
    local function plain_amount(s)
        if not s or #s > 27 or find(s, '^0.') then
            return nil
        end
        local units = #s > 12 and tonumber(s:sub(1, -13)) or 0
        local pico = tonumber(s:sub(-12))
        if units > 9007199254740991 or (units == 9007199254740991 and pico > 0) then
            return nil
        end
        return units, pico
    end

    local function amount_text(units, pico)
        return units == 0 and format('%d', pico) or format('%d%012d', units, pico)
    end

    -- A single command's `a b now [n]` when all of it is plain: `a` an integer
    -- below 10^15, `b` a decimal of at most `digits` whole digits and 6
    -- decimals, `now` `*` or such a decimal below 2^53 microseconds.
    local function plain_call(argv, digits)
        local size, b, now_text, count = argv[2], argv[3], argv[4], argv[5]
        if #argv < 4 or #argv > 5 or #size > 15 or not find(size, '^[1-9][0-9]*$') then
            return nil
        end
        local per = plain_micros(b, digits)
        if not per then
            return nil
        end
        local n = 1
        if count then
            if #count > 15 or not find(count, '^[0-9]+$') then
                return nil
            end
            n = tonumber(count)
        end
        local now
        if now_text == '*' then
            now = server_now()
        else
            now = plain_micros(now_text, 10)
            if not now or now >= TWO53 then
                return nil
            end
        end
        return tonumber(size), per, now, n
    end

    -- A bucket's rate: rate * 1000 below 2^53, capacity / rate at most 10^12 s.
    local function plain_rate(capacity, rate)
        return rate > 0 and rate <= 9007199254740 and (rate >= 1000000000 or capacity <= rate * 1000000)
    end

    -- The stored string, false for a missing key, nil for another type.
    local function plain_get(key)
        local value = redis.pcall('GET', key)
        if value and type(value) ~= 'string' then
            return nil
        end
        return value
    end

    -- Sets the key to `state`, expiring in `reset` ms; with a `plan` (RL.MULTI,
    -- which writes only when every limit admits) the write is kept for later.
    local function put(plan, key, state, reset)
        if plan then
            plan[#plan + 1] = { key, state, reset }
        else
            redis.call('SET', key, state, 'PX', format('%d', reset))
        end
    end

    local FAST = {}

    FAST['RL.TOKENBUCKET'] = function(key, argv, plan)
        local capacity, rate, now, n = plain_call(argv, 7)
        if not capacity or not plain_rate(capacity, rate) then
            return nil
        end
        local value = plain_get(key)
        if value == nil then
            return nil
        end
        local units, pico = capacity, 0
        if value then
            local _, _, tokens, last = find(value, '^rl1:tb:([0-9]+):([0-9]+)$')
            units, pico = plain_amount(tokens)
            last = plain_time(last)
            if not units or not last then
                return nil
            end
            if now < last then
                now = last
            end
            local flow = (now - last) * rate
            if flow < TWO52 then
                local sum = pico + flow
                pico = fmod(sum, PICO)
                units = units + (sum - pico) / PICO
                if units > capacity or (units == capacity and pico > 0) then
                    units, pico = capacity, 0
                end
            elseif units + 4503 >= capacity then
                units, pico = capacity, 0
            else
                return nil
            end
        end
        local per_ms = rate * 1000
        local allowed, retry, left = 0, 0, units
        if n > capacity then
            retry = -1
        elseif units < n then
            retry = plain_ms(per_ms, minus(n - units, pico))
        else
            allowed, left = 1, units - n
        end
        local reset = plain_ms(per_ms, minus(capacity - left, pico))
        if not reset or not retry then
            return nil
        end
        if allowed == 1 and n > 0 then
            put(plan, key, 'rl1:tb:' .. amount_text(left, pico) .. ':' .. format('%d', now), reset)
        end
        return { allowed, left, capacity, retry, reset }
    end

    FAST['RL.LEAKYBUCKET'] = function(key, argv, plan)
        local capacity, rate, now, n = plain_call(argv, 7)
        if not capacity or not plain_rate(capacity, rate) then
            return nil
        end
        local value = plain_get(key)
        if value == nil then
            return nil
        end
        local units, pico = 0, 0
        if value then
            local _, _, level, last = find(value, '^rl1:lb:([0-9]+):([0-9]+)$')
            units, pico = plain_amount(level)
            last = plain_time(last)
            if not units or not last or units + pico == 0 then
                return nil
            end
            if now < last then
                now = last
            end
            local flow = (now - last) * rate
            if flow < TWO52 then
                if flow <= pico then
                    pico = pico - flow
                else
                    local short = flow - pico
                    local r = fmod(short, PICO)
                    local borrow = (short - r) / PICO + (r > 0 and 1 or 0)
                    if borrow > units then
                        units, pico = 0, 0
                    else
                        units, pico = units - borrow, r > 0 and PICO - r or 0
                    end
                end
            elseif units < 4503 then
                units, pico = 0, 0 -- 2^52 pico-units drain over 4503 units
            else
                return nil
            end
        end
        local per_ms = rate * 1000
        local queued = units + n
        local wait = plain_ms(per_ms, units, pico)
        if not wait or queued >= TWO53 then
            return nil
        end
        local free = units >= capacity and 0 or capacity - units - (pico > 0 and 1 or 0)
        if n > capacity then
            return { 0, free, capacity, -1, wait, 0 }
        end
        if queued > capacity or (queued == capacity and pico > 0) then
            local retry = plain_ms(per_ms, queued - capacity, pico)
            if not retry then
                return nil
            end
            return { 0, free, capacity, retry, wait, 0 }
        end
        local reset = plain_ms(per_ms, queued, pico)
        if not reset then
            return nil
        end
        if n > 0 then
            local state = 'rl1:lb:' .. amount_text(queued, pico) .. ':' .. format('%d', now)
            put(plan, key, state, reset)
        end
        return { 1, capacity - queued - (pico > 0 and 1 or 0), capacity, 0, reset, wait }
    end

    FAST['RL.FIXEDWINDOW'] = function(key, argv, plan)
        local limit, window, now, n = plain_call(argv, 10)
        if not limit or window < 1000 or now + 2 * window >= TWO53 then
            return nil
        end
        local value = plain_get(key)
        if value == nil then
            return nil
        end
        local count = 0
        if value then
            local _, _, last, stored = find(value, '^rl1:fw:([0-9]+):([0-9]+)$')
            last, stored = plain_time(last), plain_count(stored, false)
            if not last or not stored then
                return nil
            end
            if now < last then
                now = last
            end
            if last - fmod(last, window) == now - fmod(now, window) then
                count = stored
            end
        end
        local to_end = ceil_ms(window - fmod(now, window))
        local remaining = count < limit and limit - count or 0
        if n > limit then
            return { 0, remaining, limit, -1, count == 0 and 0 or to_end }
        end
        if count > limit - n then
            return { 0, remaining, limit, to_end, to_end }
        end
        count = count + n
        local reset = count == 0 and 0 or to_end
        if n > 0 then
            local state = 'rl1:fw:' .. format('%d', now) .. ':' .. format('%d', count)
            put(plan, key, state, reset)
        end
        return { 1, limit - count, limit, 0, reset }
    end

    -- ceil(a / b) for a >= 0, b >= 1.
    local function plain_ceil_div(a, b)
        local r = fmod(a, b)
        return (a - r) / b + (r > 0 and 1 or 0)
    end

    FAST['RL.SLIDINGWINDOW'] = function(key, argv, plan)
        local limit, window, now, n = plain_call(argv, 10)
        if not limit or window < 1000 or now + 2 * window >= TWO53 then
            return nil
        end
        local value = plain_get(key)
        if value == nil then
            return nil
        end
        local previous, current = 0, 0
        local start = now - fmod(now, window)
        if value then
            local _, _, last, p, c = find(value, '^rl1:sw:([0-9]+):([0-9]+):([0-9]+)$')
            last, p, c = plain_time(last), plain_count(p, true), plain_count(c, true)
            if not last or not p or not c or p + c == 0 then
                return nil
            end
            if now < last then
                now = last
                start = now - fmod(now, window)
            end
            local last_start = last - fmod(last, window)
            if last_start == start then
                previous, current = p, c
            elseif last_start + window == start then
                previous = c
            end
        end
        -- With a previous count, every product below is at most this one:
        -- exact below 2^52. Without, the estimate is the current count.
        if now + 2 * window >= TWO53 or (previous > 0 and (previous + current + n + limit) * window >= TWO52) then
            return nil
        end
        local to_edge = start + window - now
        local weighed = previous * to_edge
        local function remaining(c)
            if previous == 0 then
                return c < limit and limit - c or 0
            end
            local room = limit * window - weighed - c * window
            return room > 0 and (room - fmod(room, window)) / window or 0
        end
        local function reset(c)
            if previous == 0 and c == 0 then
                return 0
            end
            return ceil_ms(c > 0 and to_edge + window or to_edge)
        end
        if n > limit then
            return { 0, remaining(current), limit, -1, reset(current) }
        end
        local over
        if previous == 0 then
            over = current + n > limit
        else
            over = weighed + (current + n) * window > limit * window
        end
        if over then
            local wait
            local slack = limit - current - n
            if slack >= 0 then
                local excess = weighed - slack * window
                wait = plain_ceil_div(excess > 0 and excess or 0, previous > 0 and previous or 1)
                if wait >= to_edge then
                    wait = nil
                end
            end
            if not wait then
                local excess = current - (limit - n)
                excess = excess > 0 and excess * window or 0
                if excess >= TWO52 then
                    return nil
                end
                wait = to_edge + plain_ceil_div(excess, current > 0 and current or 1)
            end
            return { 0, remaining(current), limit, ceil_ms(wait), reset(current) }
        end
        current = current + n
        local after = reset(current)
        if n > 0 then
            local state = 'rl1:sw:' .. format('%d', now) .. ':' .. format('%d', previous) .. ':' .. format('%d', current)
            put(plan, key, state, after)
        end
        return { 1, remaining(current), limit, 0, after }
    end

    FAST['RL.SLIDINGLOG'] = function(key, argv, plan)
        local limit, window, now, n = plain_call(argv, 10)
        if not limit or window < 1000 then
            return nil
        end
        local value = plain_get(key)
        if value == nil then
            return nil
        end
        local times, counts, runs, total, last = {}, {}, 0, 0, 0
        if value then
            if string.sub(value, 1, 7) ~= 'rl1:sl:' then
                return nil
            end
            local position, length, at = 8, #value, 0
            while true do
                local _, stop, delta, count = find(value, '^([0-9]+):([0-9]+)', position)
                delta, count = plain_time(delta), plain_count(count, false)
                if not delta or not count then
                    return nil
                end
                at, total = at + delta, total + count
                if at >= TWO53 or total > 9007199254740991 then
                    return nil
                end
                runs = runs + 1
                times[runs], counts[runs] = at, count
                if stop == length then
                    break
                end
                if string.sub(value, stop + 1, stop + 1) ~= ',' then
                    return nil
                end
                position = stop + 2
            end
            last = at
            if now < last then
                now = last
            end
        end
        if now + 2 * window >= TWO53 then
            return nil
        end
        -- Units at s count while s > now - window: the runs from `first` on.
        local cutoff, first, gone = now + 1 - window, 1, 0
        while first <= runs and times[first] < cutoff do
            gone, first = gone + counts[first], first + 1
        end
        local count = total - gone
        local reset = count == 0 and 0 or ceil_ms(last + window - now)
        local remaining = count < limit and limit - count or 0
        if n > limit then
            return { 0, remaining, limit, -1, reset }
        end
        if count > limit - n then
            -- Until enough of the oldest units have left.
            local must, seen, retry = count - (limit - n), 0, reset
            for i = first, runs do
                seen = seen + counts[i]
                if seen >= must then
                    retry = ceil_ms(times[i] + window - now)
                    break
                end
            end
            return { 0, remaining, limit, retry, reset }
        end
        if n > 0 then
            reset = ceil_ms(window)
            local parts, previous = {}, 0
            for i = first, runs do
                parts[#parts + 1] = format('%d:%d', times[i] - previous, counts[i])
                previous = times[i]
            end
            parts[#parts + 1] = format('%d:%d', now - previous, n)
            put(plan, key, 'rl1:sl:' .. table.concat(parts, ','), reset)
        end
        return { 1, remaining - n, limit, 0, reset }
    end

    -- RL.MULTI from the limits' fast paths, run dry: every limit decides on
    -- what it reads, and only when all of them admit are their writes made.
    -- Anything a fast path does not take goes to general() with nothing
    -- written.
    local function multi_fast(keys, argv)
        local k = #keys
        if k == 0 or k > 1000 or #argv ~= 2 + 4 * k then
            return nil
        end
        local now, seen, limits, plan, replies = argv[2], {}, {}, {}, {}
        local allowed = true
        for i = 1, k do
            if seen[keys[i]] then
                return nil
            end
            seen[keys[i]] = true
            local at = 3 + 4 * (i - 1)
            local name = 'RL.' .. string.upper(argv[at])
            local fast = FAST[name]
            if not fast then
                return nil
            end
            limits[i] = { fast, { name, argv[at + 1], argv[at + 2], now, argv[at + 3] } }
            local reply = fast(keys[i], limits[i][2], plan)
            if not reply then
                return nil
            end
            replies[i] = reply
            allowed = allowed and reply[1] == 1
        end
        if allowed then
            for i = 1, #plan do
                local write = plan[i]
                redis.call('SET', write[1], write[2], 'PX', format('%d', write[3]))
            end
            local reply = { 1, 0 }
            for i = 1, k do
                reply[2 + i] = replies[i]
            end
            return reply
        end
        -- Nothing is taken: a limit that would admit reports its state as a
        -- look (n = 0) does.
        local retry, reply = 0, { 0, 0 }
        for i = 1, k do
            if replies[i][1] == 1 then
                local call = limits[i][2]
                call[5] = '0'
                replies[i] = limits[i][1](keys[i], call, {})
                if not replies[i] then
                    return nil
                end
            end
            local wait = replies[i][4]
            if retry ~= -1 then
                retry = wait == -1 and -1 or (wait > retry and wait or retry)
            end
            reply[2 + i] = replies[i]
        end
        reply[2] = retry
        return reply
    end

    -- One call: RL.MULTI and the single-key commands on their fast paths
    -- when they take the call, else general(). KEYS and ARGV as EVALSHA
    -- gives them; FCALL gives the same as the callback's two arguments.
    local function dispatch(KEYS, ARGV)
        server_time = nil -- a function library's top level lives on between calls
        if string.upper(ARGV[1] or '') == 'RL.MULTI' then
            local reply = multi_fast(KEYS, ARGV)
            if reply then
                return reply
            end
        end
        local fast = #KEYS == 1 and FAST[string.upper(ARGV[1] or '')]
        if fast then
            local reply = fast(KEYS[1], ARGV)
            if reply then
                return reply
            end
        end
        return general(KEYS, ARGV)
    end

    return dispatch
end

-- Loaded with FUNCTION LOAD (the clients prepend `#!lua name=ratelimit_<v>`
-- and `local RATELIMIT_FUNCTION = 'ratelimit_<v>'`), the file registers one
-- function of that name. Loading runs only this top level, which sees no
-- global but `redis` (Redis 7.0), so the library is built at the first
-- call, once. Run by EVAL or EVALSHA, register_function is nil and the
-- call is answered at once.
if redis.register_function then
    local dispatch
    redis.register_function {
        function_name = RATELIMIT_FUNCTION,
        callback = function(keys, args)
            dispatch = dispatch or library()
            return dispatch(keys, args)
        end,
    }
    return
end
return library()(KEYS, ARGV)
