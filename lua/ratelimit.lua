-- redis-ratelimit, script mode: the module's commands for a Redis or Valkey
-- without the module (managed services), in one Lua source, called two ways:
--
--   FCALL ratelimit_<v> <numkeys> <key...> <COMMAND> <args...>
--       Redis 7+ and Valkey: the source loaded once with FUNCTION LOAD as
--       a library, after two lines:
--           #!lua name=ratelimit_<v>
--           local RATELIMIT_FUNCTION = 'ratelimit_<v>'
--       where <v> is the first 12 hex digits of the SHA1 of this file (the
--       digits of its EVALSHA sha): each version is a library of its own.
--   EVALSHA <sha1> <numkeys> <key...> <COMMAND> <args...>
--       any Redis from 6.2, and where Functions may not be loaded.
--
-- The keys are the module command's keys in its order; the first argument
-- is the module command's name (any case): RL.TOKENBUCKET, RL.LEAKYBUCKET,
-- RL.FIXEDWINDOW, RL.SLIDINGWINDOW, RL.SLIDINGLOG, RL.MULTI, RL.PEEK,
-- RL.REFUND, RL.ACQUIRE, RL.RELEASE, RL.RENEW; the rest are its own
-- arguments without the keys (and, for RL.MULTI, numkeys). The reply is the
-- module's, field for field; errors are its error strings. `now` = `*`
-- reads the server's clock (TIME).
--
-- State: a plain Redis string, version 1, fields in decimal, times in Unix
-- microseconds, the buckets' amounts in pico-units (10^-12 of a unit):
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
-- Read too, not written: the layouts of long sliding logs and lease sets
-- that the next version writes (two versions share keys during a rolling
-- deploy), their sums in a head of fixed widths, zero-padded, so that a
-- call can read and update a few bytes of a long value (GETRANGE,
-- SETRANGE, APPEND):
--
--   rl2:sl:<units:16>:<newest_us:18>:<first_us:18>:<offset:10>:<runs>
--       the log's units, its newest run's time, its first live run's time
--       and byte offset (0-based: 73 when no left run precedes it); the
--       runs as rl1's from there, the first one's own time not read (after
--       a trim it is a step from a run that has left)
--   rl2:cc:<last_us:18>:<next_id:16>:<held:16>:<last_end:18>:<first_end:18>:<offset:10>:<leases>
--       rl1's last update and next id, the slots held, the latest end, a
--       time at or before the earliest end, and the byte offset of the
--       first lease (109 when none precedes it); the leases as rl1's
--
-- Each field means what the module's state means (docs/commands.md,
-- RL.SETSTATE). The key expires when the limiter is fresh again (PTTL =
-- reset_after_ms); a fresh limiter is no key. A value is checked when read:
-- a string that is not a state of this algorithm is WRONGTYPE, a damaged
-- one an ERR, a key of the module's own type an error that names both.
--
-- Exactness: Lua has only doubles, exact for integers below 2^53. Counts
-- (limits, n, units, lease ids: at most 2^53 - 1) are plain numbers; the
-- buckets keep their amounts as whole units and a pico-unit fraction, two
-- plain numbers; products go through muldiv, exact in doubles. Times,
-- windows, leases and rates are plain below 2^52 (a time before 2112, a
-- window of 142 years, 4.5 * 10^9 units a second); a call that meets one
-- past that (or a product past 2^52) is "wide": its number helpers work on
-- limbs of 7 decimal digits (the wide part, built only then).
--
-- The file: the parts (shared helpers, the wide numbers, one part per
-- algorithm as in src/algorithms and the heads of the next layouts (rl2)
-- after the sliding log's, the commands, then RL.PEEK with RL.REFUND,
-- RL.MULTI, and RL.RELEASE with RL.RENEW), each a branch of one function
-- that builds it when a call first needs it; then the call. EVALSHA runs
-- the whole file on every call, and builds only the parts the call uses; a
-- function library builds each part once and keeps it.

-- The string and math functions the parts share. Held here, they reach
-- each part's functions as upvalues of build(), below: copies in a part would
-- each be an upvalue that EVALSHA makes again on every call. (Taken when
-- the first part is built: FUNCTION LOAD runs this top level with no
-- `string` or `math` in sight on Redis 7.0.)
--
-- Digits already checked (by a pattern, or from TIME) are read by
-- arithmetic, `s + 0`: one strtod, where Lua 5.1's tonumber takes two.
local find, sub, byte, format, fmod, floor

local lasting = false -- whether the parts live on from call to call (FCALL)

local part -- part(name): the part `name`, built on first use (after the parts)

-- The shared helpers, set when the base part is built (`function fail`
-- there sets the local `fail` here). The other parts reach them as
-- upvalues of build(), not as fields of a table or copies in locals of
-- their own: under EVALSHA both of those are made again on every call.
local fail, Failure, wide, note, add, minus, lt, mod, muldiv, ms, to_text, within
local parse_count, parse_size, parse_span, window_limit, now_us, read_state, write_state
local stored_count, stored_span, stored_time, MAX_SPAN_US, MAX_TIME_US
-- And the commands part's and the named part's, set the same way.
local arity, check, fields, parse_limit, call, named_limit, count_or_one

-- The parts -------------------------------------------------------------------
-- build(name) builds the part `name`: one function, a branch a part, rather
-- than a function a part: under EVALSHA each of those would be a closure
-- made again on every call (13 of them, some 10,000 instructions), where a
-- branch makes its closures only when it runs.

local function build(name)
    if name == 'errors' then
        -- Errors --------------------------------------------------------------
        -- Worded as the module's (src/error.rs); built when a call fails.
        return {
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
    elseif name == 'base' then
        -- Shared helpers ------------------------------------------------------
        -- Errors, numbers, arguments, stored fields, the server's clock.
        -- A failure: the module's error `name` (or a message of its own),
        -- unwound with error() and turned into an error reply by the call.
        Failure = {}
        function fail(name)
            error(setmetatable({ message = part('errors')[name] or name }, Failure), 0)
        end

        -- Numbers -------------------------------------------------------------
        -- Counts (limits, n, units, ids) are plain numbers, below 2^53. Times,
        -- spans and rates are plain below 2^52, where a sum of two is below
        -- 2^53 and exact, and the helpers below are the plain operators. A
        -- time-like value of 2^52 or more (a time after 2112, a window or a
        -- rate that large, a product's quotient) makes the rest of the call
        -- wide: the helpers then work on limbs (the wide part), which hold any
        -- value and are plain numbers below 2^53.

        -- Whether the call is wide (`wide`, a local of the file's, which every
        -- part reads); each call starts plain (the commands part sets it so).
        local W
        wide = false

        local function go_wide()
            wide, W = true, W or part('wide')
        end

        -- A time-like value as it enters the call: plain, or limbs (which made
        -- the call wide already).
        function note(t)
            if not wide and t >= 4503599627370496 then -- 2^52
                go_wide()
            end
            return t
        end

        function add(a, b)
            if wide then
                return W.add(a, b)
            end
            return note(a + b)
        end

        -- a - b, for a >= b.
        function minus(a, b)
            if wide then
                return W.sub(a, b)
            end
            return a - b
        end

        function lt(a, b)
            if wide then
                return W.cmp(a, b) < 0
            end
            return a < b
        end

        function mod(a, b)
            if wide then
                local _, r = W.divmod(a, b)
                return r
            end
            return fmod(a, b)
        end

        -- floor((a * b + plus) / c) and the remainder, for c >= 1 and a count
        -- `plus` below 2^52. In doubles for plain a and b, c up to 2^52 and a
        -- quotient below 2^52: the quotient of the rounded numerator is off by
        -- at most 1, and the remainder, exact from the two products (Dekker's:
        -- each factor split in halves whose products are exact), says which
        -- way. Else in limbs.
        function muldiv(a, b, c, plus)
            if not wide then
                local n = a * b + plus
                if n < 9007199254740992 then -- 2^53
                    local r = fmod(n, c)
                    return (n - r) / c, r
                end
                if c <= 4503599627370496 then
                    -- a * b = high + low, q * c = qhigh + qlow, exactly.
                    local t = 134217729 * a -- 2^27 + 1
                    local ah = t - (t - a)
                    local al = a - ah
                    t = 134217729 * b
                    local bh = t - (t - b)
                    local bl = b - bh
                    local high = a * b
                    local low = ((ah * bh - high) + ah * bl + al * bh) + al * bl
                    local q = floor((high + (low + plus)) / c)
                    if q < 4503599627370496 then
                        t = 134217729 * q
                        local qh = t - (t - q)
                        local ql = q - qh
                        t = 134217729 * c
                        local ch = t - (t - c)
                        local cl = c - ch
                        local qhigh = q * c
                        local qlow = ((qh * ch - qhigh) + qh * cl + ql * ch) + ql * cl
                        local r = (high - qhigh) + (low - qlow) + plus
                        if r < 0 then
                            return q - 1, r + c
                        elseif r >= c then
                            return q + 1, r - c
                        end
                        return q, r
                    end
                end
                go_wide()
            end
            return W.divmod(W.add(W.mul(a, b), plus), c)
        end

        -- ceil(us / 1000): milliseconds, rounded up.
        function ms(us)
            if not wide then
                local r = fmod(us, 1000)
                return (us - r) / 1000 + (r > 0 and 1 or 0)
            end
            local q, r = muldiv(us, 1, 1000, 0)
            return r ~= 0 and add(q, 1) or q
        end

        -- Digits as a number, limbs from 2^53 on (which make the call wide).
        local function decimal(s)
            local n = #s
            if n <= 15 or (n == 16 and s <= '9007199254740991') then
                return s + 0
            end
            local first = find(s, '[^0]')
            if not first then
                return 0
            elseif first > 1 then
                return decimal(sub(s, first))
            end
            go_wide()
            return W.from_decimal(s)
        end

        -- A number in decimal.
        function to_text(x)
            return wide and W.to_decimal(x) or format('%d', x)
        end

        -- Bounds past 2^53 (checked only in a wide call: plain numbers are
        -- within them).
        MAX_SPAN_US = '1000000000000000000' -- 10^12 s
        MAX_TIME_US = '253402300799999999' -- 9999-12-31T23:59:59.999999Z
        function within(x, bound)
            return not wide or W.cmp(x, W.from_decimal(bound)) <= 0
        end

        -- Arguments (src/args.rs) ---------------------------------------------

        -- An integer of at most 20 ASCII digits (the module's u64 parser) from
        -- 0 to 2^53 - 1, or nil. (In patterns, %d is 0 to 9 only: Redis and
        -- Valkey leave Lua in the C locale's character classes; [0-9] would
        -- cost more, a class walked for every byte.)
        function parse_count(s)
            if s == '1' then
                return 1
            end
            local n = #s
            if n > 20 or not find(s, '^%d+$') then
                return nil
            elseif n > 16 then
                local first = find(s, '[^0]') or n
                s, n = sub(s, first), n - first + 1
            end
            if n < 16 or (n == 16 and s <= '9007199254740991') then
                return s + 0
            end
        end

        -- A limit's size (capacity or limit): 1 to 2^53 - 1.
        function parse_size(s, message)
            local n = parse_count(s)
            if not n or n < 1 then
                fail(message)
            end
            return n
        end

        -- A non-negative decimal in millionths, rounded half up at the seventh
        -- decimal: `12`, `0.5`, `.25`, `3.`; nil for anything else. Up to 9
        -- whole digits and 6 decimals it is read as one double, within 0.23 of
        -- the millionths, which rounding finds; a Unix time's 10 whole digits
        -- are read apart from its decimals.
        local function micros(s)
            if not find(s, '^%d*%.?%d*$') or s == '' or s == '.' then
                return nil
            end
            local dot = find(s, '.', 1, true)
            local whole, decimals = #s, 0
            if dot then
                whole, decimals = dot - 1, #s - dot
            end
            if whole <= 9 and decimals <= 6 then
                return floor(s * 1000000 + 0.5)
            elseif whole == 10 and decimals <= 6 and s < '9007199254' then
                local us = (dot and sub(s, 1, whole) or s) * 1000000
                return decimals > 0 and us + sub(s, dot + 1) * 10 ^ (6 - decimals) or us -- (pow, exact here)
            elseif whole > 20 then
                return nil
            end
            local fraction = sub(s, whole + 2)
            local value = decimal(sub(s, 1, whole) .. sub(fraction .. '000000', 1, 6))
            if sub(fraction, 7, 7) >= '5' then
                value = add(value, 1)
            end
            return note(value)
        end

        -- A span of time in microseconds: `low` to 10^12 s.
        function parse_span(s, low, message)
            local us = micros(s)
            if not us or not within(us, MAX_SPAN_US) or lt(us, low) then
                fail(message)
            end
            return us
        end

        -- The limit and the window of the windows and the sliding log.
        function window_limit(a, b)
            return parse_size(a, 'limit'), parse_span(b, 1000, 'window')
        end

        -- Unix microseconds now: `*`, the server's clock, or a decimal.
        -- Writes after TIME are replicated by their effects: Redis 6.2 may be
        -- set to replicate scripts verbatim, so a script asks for effects;
        -- functions always replicate effects, and skip the call.
        local replicate = not lasting and redis.replicate_commands
        function now_us(s)
            if s == '*' then
                if replicate then
                    replicate()
                end
                local t = redis.call('TIME')
                return note(t[1] * 1000000 + t[2])
            end
            local us = micros(s)
            if not us or not within(us, MAX_TIME_US) then
                fail('now')
            end
            return us
        end

        -- Stored values -------------------------------------------------------

        -- The value of `key` when it holds a state of algorithm `A`, whose
        -- values start with `A.prefix` (`rl1:tb:`...: the state's fields from
        -- byte 8 on) or `A.prefix2` (the next layouts' `rl2:sl:` and
        -- `rl2:cc:`); nil for a missing key.
        function read_state(key, A)
            local value = redis.pcall('GET', key)
            if not value then
                return nil
            elseif value.err then -- (a string's .err is nil)
                if find(value.err, 'WRONGTYPE', 1, true) ~= 1 then
                    fail(value.err) -- Redis's own error: GET refused by the caller's ACL
                end
                -- Another type.
                if redis.call('TYPE', key).ok == 'ratelimit' then
                    fail('module_key')
                end
                fail('wrongtype')
            elseif find(value, A.prefix, 1, true) ~= 1 and not (A.prefix2 and find(value, A.prefix2, 1, true) == 1) then
                fail('wrongtype')
            end
            return value
        end

        -- The new state, expiring when the limiter is fresh again; no key
        -- when it is fresh already. A value starting with a comma is a
        -- sliding log's new run, appended to the stored log (a stored value
        -- starts with `rl1:`) after its expiry is set: a caller whose ACL
        -- refuses PEXPIRE then changes nothing. (PX in decimal: Redis would
        -- write a number argument with %.17g, a slower printf.)
        function write_state(key, value, reset_ms)
            if reset_ms == 0 then
                redis.call('DEL', key)
            elseif byte(value) == 44 then -- ','
                redis.call('PEXPIRE', key, format('%d', reset_ms))
                redis.call('APPEND', key, value)
            else
                redis.call('SET', key, value, 'PX', format('%d', reset_ms))
            end
        end

        -- A stored count: digits with no leading zero, `low` (0 or 1) to
        -- 2^53 - 1.
        function stored_count(s, low)
            local n = s and #s or 17
            if n > 16 or (n > 1 and byte(s) == 48) or (n == 16 and s > '9007199254740991') then
                fail('corrupt')
            end
            n = s + 0
            if n < low then
                fail('corrupt')
            end
            return n
        end

        -- A stored time or span: digits with no leading zero.
        function stored_span(s)
            if not s or (byte(s) == 48 and #s > 1) then
                fail('corrupt')
            end
            return note(decimal(s))
        end

        -- A stored time: up to the end of 9999.
        function stored_time(s)
            local n = s and #s or 0
            if n > 0 and (n < 16 or (n == 16 and s < '4503599627370496')) and (n == 1 or byte(s) ~= 48) then
                return s + 0 -- below 2^52, the usual case, at once
            end
            local t = stored_span(s)
            return within(t, MAX_TIME_US) and t or fail('corrupt')
        end

        return true
    elseif name == 'wide' then
        -- The wide part: limbs ------------------------------------------------
        -- Numbers from 2^53 on, as arrays of base-10^7 limbs, least significant
        -- first (products of two limbs stay below 2^53). Every function takes
        -- plain numbers or limbs and returns a plain number when the value is
        -- below 2^53.
        local max, concat, type, tonumber = math.max, table.concat, type, tonumber
        local BASE = 10000000
        local TWO52, TWO53 = 4503599627370496, 9007199254740992
        local W = {}

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

        -- No leading zero limbs, and a plain number below 2^53.
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

        function W.add(a, b)
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
        local function sub_limbs(a, b)
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
        W.sub = sub_limbs

        function W.mul(a, b)
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
            elseif not ta then
                return -1
            elseif not tb then
                return 1
            elseif #a ~= #b then
                return #a < #b and -1 or 1
            end
            for i = #a, 1, -1 do
                if a[i] ~= b[i] then
                    return a[i] < b[i] and -1 or 1
                end
            end
            return 0
        end
        W.cmp = cmp

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

        -- floor(a / b) and a mod b, b > 0: each step takes a quotient estimated
        -- from doubles, shrunk so that it never overshoots, exactly.
        function W.divmod(a, b)
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
                r = sub_limbs(r, shift(W.mul(b, estimate), k))
                q = W.add(q, shift(estimate, k))
            end
            return q, r
        end

        -- Digits (no leading zero) as limbs.
        function W.from_decimal(s)
            local t, k = {}, 0
            for j = #s, 1, -7 do
                k = k + 1
                t[k] = tonumber(sub(s, j > 7 and j - 6 or 1, j))
            end
            return norm(t)
        end

        function W.to_decimal(x)
            if type(x) == 'number' then
                return format('%d', x)
            end
            local parts = { format('%d', x[#x]) }
            for i = #x - 1, 1, -1 do
                parts[#parts + 1] = format('%07d', x[i])
            end
            return concat(parts)
        end

        return W
    elseif name == 'tb' then
        -- Token bucket (src/algorithms/token_bucket.rs) -----------------------
        -- An amount of pico-units is kept as whole units and a fraction below
        -- 10^12 pico-units: two plain numbers, the units never past 2^53 - 1. The
        -- leaky bucket shares the limit, the value, the flow and the timing.
        part('base')
        local PICO = 1000000000000

        -- capacity, and rate in pico-units per microsecond.
        local function parse(a, b)
            local capacity = parse_size(a, 'capacity')
            local rate = parse_span(b, 1, 'rate')
            -- capacity / rate at most 10^12 s: rate >= capacity / 10^6.
            local r = fmod(capacity, 1000000)
            if lt(rate, (capacity - r) / 1000000 + (r > 0 and 1 or 0)) then
                fail('fill')
            end
            return capacity, rate
        end

        -- The amount, as (units, pico), and the time of a value
        -- `<prefix><pico-units>:<last_us>`; the amount at most
        -- (2^53 - 1) * 10^12.
        local function decode(value)
            local _, _, colon = find(value, '^%d+():%d+$', 8)
            local length = colon and colon - 8 or 29
            if length > 28 or (byte(value, 8) == 48 and length > 1) then
                fail('corrupt')
            end
            local units = length > 12 and sub(value, 8, colon - 13) + 0 or 0
            local pico = sub(value, length > 12 and colon - 12 or 8, colon - 1) + 0
            if units > 9007199254740991 or (units == 9007199254740991 and pico > 0) then
                fail('corrupt')
            end
            return units, pico, stored_time(sub(value, colon + 1))
        end

        -- `rl1:tb:<pico-units>:<now>` (`rl1:lb:` for the leaky bucket), in one
        -- format() while `now` is plain, the prefix written in the format (a
        -- %s would be one more sprintf).
        local function encode(units, pico, now, leaky)
            if wide then
                local prefix = leaky and 'rl1:lb:' or 'rl1:tb:'
                if units == 0 then
                    return format('%s%d:%s', prefix, pico, to_text(now))
                end
                return format('%s%d%012d:%s', prefix, units, pico, to_text(now))
            elseif units == 0 then
                return format(leaky and 'rl1:lb:%d:%d' or 'rl1:tb:%d:%d', pico, now)
            elseif pico == 0 then -- (a full bucket less whole units: a new key's)
                return format(leaky and 'rl1:lb:%d000000000000:%d' or 'rl1:tb:%d000000000000:%d', units, now)
            end
            return format(leaky and 'rl1:lb:%d%012d:%d' or 'rl1:tb:%d%012d:%d', units, pico, now)
        end

        -- Pico-units flowing from `from` to `to`, as (units, pico); past
        -- `most` units, most + 1 (all it takes to fill or drain what is there).
        local function flow(from, to, rate, most)
            local elapsed = minus(to, from)
            if not wide and elapsed * rate > (most + 2) * 1.000001e12 then
                return most + 1, 0
            end
            local units, pico = muldiv(elapsed, rate, PICO, 0)
            if lt(most, units) then
                return most + 1, 0
            end
            return units, pico
        end

        -- Milliseconds, rounded up, for units * 10^12 + pico pico-units to
        -- flow: ceil(x / (1000 * rate)) = ceil(ceil(x / 1000) / rate). With a
        -- `target`, for the bucket to go from units + pico to target units.
        local function ms_for(rate, units, pico, target)
            if target then
                units, pico = target - units - (pico > 0 and 1 or 0), pico > 0 and PICO - pico or 0
            end
            local r = fmod(pico, 1000)
            local q
            q, r = muldiv(units, 1000000000, rate, (pico - r) / 1000 + (r > 0 and 1 or 0))
            return r ~= 0 and add(q, 1) or q
        end

        -- The tokens at `now` (never before the last update): the stored ones
        -- plus what flowed in since, at most the capacity; a missing key is a
        -- full bucket.
        local function refill(value, now, capacity, rate)
            if not value then
                return capacity, 0, now
            end
            local units, pico, last = decode(value)
            if lt(now, last) then
                now = last
            end
            local more, more_pico = flow(last, now, rate, capacity)
            units, pico = units + more, pico + more_pico
            if pico >= PICO then
                units, pico = units + 1, pico - PICO
            end
            if units >= capacity then
                return capacity, 0, now
            end
            return units, pico, now
        end

        -- Takes `n` tokens when there are as many. `n` = 0 only looks, as
        -- `look` does (nothing to store). Returns allowed, remaining,
        -- retry_after_ms, reset_after_ms, the sixth field and the new value.
        local function take(value, now, capacity, rate, n, look)
            local units, pico
            units, pico, now = refill(value, now, capacity, rate)
            if n > capacity then
                return 0, units, -1, ms_for(rate, units, pico, capacity)
            elseif units < n then
                return 0, units, ms_for(rate, units, pico, n), ms_for(rate, units, pico, capacity)
            end
            units = units - n
            local reset = ms_for(rate, units, pico, capacity)
            if n == 0 or look then
                return 1, units, 0, reset
            end
            return 1, units, 0, reset, nil, encode(units, pico, now)
        end

        -- Gives `n` tokens back, up to the capacity.
        local function refund(value, now, capacity, rate, n)
            local units, pico
            units, pico, now = refill(value, now, capacity, rate)
            if units + n >= capacity then
                units, pico = capacity, 0
            else
                units = units + n
            end
            local reset = ms_for(rate, units, pico, capacity)
            if not value or n == 0 then
                return 1, units, 0, reset
            end
            return 1, units, 0, reset, nil, encode(units, pico, now)
        end

        return {
            prefix = 'rl1:tb:',
            parse = parse,
            decode = decode,
            encode = encode,
            flow = flow,
            take = take,
            refund = refund,
            ms_for = ms_for,
        }
    elseif name == 'lb' then
        -- Leaky bucket (src/algorithms/leaky_bucket.rs) -----------------------
        -- The queue's level, kept as the token bucket keeps its tokens; the sixth
        -- field of a reply is delay_ms.
        local T = part('tb')
        local ms_for = T.ms_for
        local PICO = 1000000000000

        -- The level at `now` (never before the last update), drained since;
        -- a missing key is an empty queue.
        local function drain(value, now, rate)
            if not value then
                return 0, 0, now
            end
            local units, pico, last = T.decode(value)
            if units == 0 and pico == 0 then
                fail('corrupt')
            end
            if lt(now, last) then
                now = last
            end
            local out, out_pico = T.flow(last, now, rate, units)
            if out > units or (out == units and out_pico >= pico) then
                return 0, 0, now
            elseif out_pico > pico then
                return units - out - 1, pico + PICO - out_pico, now
            end
            return units - out, pico - out_pico, now
        end

        -- Whole units that fit on top of a level.
        local function free(capacity, units, pico)
            local room = capacity - units - (pico > 0 and 1 or 0)
            return room > 0 and room or 0
        end

        -- Queues `n` units when they fit; `n` = 0 (or `look`) only looks.
        local function take(value, now, capacity, rate, n, look)
            local units, pico
            units, pico, now = drain(value, now, rate)
            local wait = ms_for(rate, units, pico)
            if n > capacity then
                return 0, free(capacity, units, pico), -1, wait, 0
            end
            local queued = units + n
            if queued > capacity or (queued == capacity and pico > 0) then
                -- Until the level is capacity - n.
                return 0, free(capacity, units, pico), ms_for(rate, units - (capacity - n), pico), wait, 0
            end
            local reset = ms_for(rate, queued, pico)
            if n == 0 or look then
                return 1, free(capacity, queued, pico), 0, reset, wait
            end
            return 1, free(capacity, queued, pico), 0, reset, wait, T.encode(queued, pico, now, true)
        end

        -- Takes `n` units off the queue, not below empty.
        local function refund(value, now, capacity, rate, n)
            local units, pico
            units, pico, now = drain(value, now, rate)
            if units < n then
                units, pico = 0, 0
            else
                units = units - n
            end
            local reset = ms_for(rate, units, pico)
            if not value or n == 0 then
                return 1, free(capacity, units, pico), 0, reset, reset
            end
            return 1, free(capacity, units, pico), 0, reset, reset, T.encode(units, pico, now, true)
        end

        return {
            prefix = 'rl1:lb:', parse = T.parse,
            take = take,
            refund = refund,
        }
    elseif name == 'fw' then
        -- Fixed window (src/algorithms/fixed_window.rs) -----------------------
        -- Windows aligned to the Unix epoch: the window holding t ends
        -- w - t mod w microseconds after t.
        part('base')

        -- The time (never before the last update) and the units counted in
        -- its window.
        local function current(value, now, w)
            if not value then
                return now, 0
            end
            local _, _, last, count = find(value, '^(%d+):(%d+)$', 8)
            last, count = stored_time(last), stored_count(count, 1)
            if lt(now, last) then
                now = last
            end
            if lt(minus(now, last), minus(w, mod(last, w))) then
                return now, count
            end
            return now, 0
        end

        -- Milliseconds to the end of the window; 0 for an empty one.
        local function reset(now, count, w)
            return count == 0 and 0 or ms(minus(w, mod(now, w)))
        end

        local function encode(now, count)
            if wide then
                return format('rl1:fw:%s:%d', to_text(now), count)
            end
            return format('rl1:fw:%d:%d', now, count)
        end

        local function take(value, now, limit, w, n, look)
            local count
            now, count = current(value, now, w)
            local remaining = count < limit and limit - count or 0
            if n > limit then
                return 0, remaining, -1, reset(now, count, w)
            elseif count > limit - n then
                -- The next window starts empty, and n <= limit fits there.
                local to_end = reset(now, count, w)
                return 0, remaining, to_end, to_end
            end
            count = count + n
            if n == 0 or look then
                return 1, limit - count, 0, reset(now, count, w)
            end
            return 1, limit - count, 0, reset(now, count, w), nil, encode(now, count)
        end

        -- Uncounts up to `n` units of the current window.
        local function refund(value, now, limit, w, n)
            local count
            now, count = current(value, now, w)
            count = count > n and count - n or 0
            local remaining = count < limit and limit - count or 0
            if not value or n == 0 then
                return 1, remaining, 0, reset(now, count, w)
            end
            return 1, remaining, 0, reset(now, count, w), nil, encode(now, count)
        end

        return {
            prefix = 'rl1:fw:',
            parse = window_limit,
            take = take,
            refund = refund,
        }
    elseif name == 'sw' then
        -- Sliding window (src/algorithms/sliding_window.rs) -------------------
        -- estimate = previous * left / w + current, `left` the microseconds to the
        -- end of the current window. In whole units: the previous window's weight
        -- is previous * left / w rounded up, and estimate > limit exactly when
        -- weight + current > limit.
        part('base')

        -- The time (never before the last update) and the counts as seen
        -- from it: rolled forward by the windows that began since.
        local function at(value, now, w)
            if not value then
                return now, 0, 0
            end
            local _, _, last, previous, current = find(value, '^(%d+):(%d+):(%d+)$', 8)
            last = stored_time(last)
            previous, current = stored_count(previous, 0), stored_count(current, 0)
            if previous + current == 0 then
                fail('corrupt')
            end
            if lt(now, last) then
                now = last
            end
            local since, edge = minus(now, last), minus(w, mod(last, w))
            if lt(since, edge) then
                return now, previous, current
            elseif lt(since, add(edge, w)) then
                return now, current, 0
            end
            return now, 0, 0
        end

        -- The previous window's weight: ceil(previous * left / w).
        local function weight(previous, left, w)
            if previous == 0 then
                return 0
            end
            local q, r = muldiv(previous, left, w, 0)
            return r ~= 0 and q + 1 or q
        end

        -- floor(limit - estimate), at least 0.
        local function remaining(limit, current, weighted)
            local room = limit - current - weighted
            return room > 0 and room or 0
        end

        -- Milliseconds until both counts have slid out.
        local function reset(previous, current, left, w)
            if current > 0 then
                return ms(add(left, w))
            end
            return previous > 0 and ms(left) or 0
        end

        local function encode(now, previous, current)
            if wide then
                return format('rl1:sw:%s:%d:%d', to_text(now), previous, current)
            end
            return format('rl1:sw:%d:%d:%d', now, previous, current)
        end

        -- Microseconds until `n` more units fit, with nothing else arriving:
        -- within this window once previous * (left - wait) <= slack * w, else
        -- in the next, where the current count is the weighted one.
        local function wait_for(limit, n, previous, current, left, w)
            local slack = limit - current - n
            if slack >= 0 then
                if previous == 0 then
                    return 0
                end
                local q = muldiv(slack, w, previous, 0)
                if q ~= 0 then
                    return lt(q, left) and minus(left, q) or 0
                end
            end
            local excess = current - (limit - n)
            if excess <= 0 then
                return left
            end
            local q, r = muldiv(excess, w, current, 0)
            return add(left, r ~= 0 and add(q, 1) or q)
        end

        local function take(value, now, limit, w, n, look)
            local previous, current
            now, previous, current = at(value, now, w)
            local left = minus(w, mod(now, w))
            local weighted = weight(previous, left, w)
            if n > limit then
                return 0, remaining(limit, current, weighted), -1, reset(previous, current, left, w)
            elseif weighted + current + n > limit then
                local retry = ms(wait_for(limit, n, previous, current, left, w))
                return 0, remaining(limit, current, weighted), retry, reset(previous, current, left, w)
            end
            current = current + n
            local after = reset(previous, current, left, w)
            if n == 0 or look then
                return 1, remaining(limit, current, weighted), 0, after
            end
            return 1, remaining(limit, current, weighted), 0, after, nil, encode(now, previous, current)
        end

        -- Uncounts up to `n` units: the current window's first, then the
        -- previous one's.
        local function refund(value, now, limit, w, n)
            local previous, current
            now, previous, current = at(value, now, w)
            local from_current = n < current and n or current
            current = current - from_current
            previous = previous > n - from_current and previous - (n - from_current) or 0
            local left = minus(w, mod(now, w))
            local after = reset(previous, current, left, w)
            local room = remaining(limit, current, weight(previous, left, w))
            if not value or n == 0 then
                return 1, room, 0, after
            end
            return 1, room, 0, after, nil, encode(now, previous, current)
        end

        return {
            prefix = 'rl1:sw:', parse = window_limit,
            take = take,
            refund = refund,
        }
    elseif name == 'sl' then
        -- Sliding log (src/algorithms/sliding_log.rs) -------------------------
        -- A stored log is read once, for its sums: its first run (time, units,
        -- where its text ends in the value), its units in all and the time of
        -- its newest run. A call then walks from the front only as far as it
        -- needs (past the runs that have left the window; on a refusal, to the
        -- unit whose leaving makes room), and copies the runs it keeps as they
        -- are stored.
        part('base')

        -- The sums of the logs this library last wrote, by key (a function
        -- library, FCALL): a value read back as it was written is not parsed
        -- again (Redis still hashes its every byte as it hands it over).
        -- Each entry counts its value's bytes and 600 (its table, its key, as
        -- measured) towards a size of at most 8 MB (past that it starts
        -- again).
        local written, written_size = lasting and {}, 0

        -- Keeps the sums of `new`, written to `key`: its first run's time and
        -- units, its units in all, its newest run's time. The callers keep
        -- only a log past 192 bytes (some 16 to 24 runs): a shorter one is
        -- read at little cost, and entries for the many short logs of many
        -- keys would be made and dropped all the time. (A function library
        -- only.) A run appended to `old` (`new` its text, see take) is kept
        -- as the two pieces, `head` and `tail`, the whole never made.
        local keep = lasting and function(key, new, first, first_count, total, last, old)
            if wide then
                return
            end
            local whole = old or new
            local S, size, comma = written[key], #whole + (old and #new or 0) + 600, find(whole, ',', 8, true)
            written_size = written_size + size - (S and S.size or 0)
            if written_size > 8388608 then
                written, written_size, S = {}, size, nil
            end
            local stop = comma and comma - 1 or #whole -- (the first run's text ends before the first comma)
            local value, tail = not old and new or nil, old and new
            if S then
                S.value, S.head, S.tail, S.size = value, old, tail, size
                S.at, S.count, S.stop, S.total, S.last = first, first_count, stop, total, last
            else -- (made whole: a table given its keys one by one grows at each power of two)
                written[key] = {
                    value = value, head = old, tail = tail, size = size,
                    at = first, count = first_count, stop = stop, total = total, last = last,
                }
            end
        end

        -- A stored log's sums: the first run's time, units and text end, the
        -- units in all, the newest run's time; and whether it is an rl2 log.
        local function decode(value, key)
            local S = written and key and written[key]
            if S then
                local head, tail = S.head, S.tail
                if S.value == value or head and #value == #head + #tail
                    and find(value, tail, #head + 1, true) and find(value, head, 1, true) == 1 then
                    -- (An appended value is compared in place: no piece of it
                    -- is made.)
                    S.value, S.head, S.tail = value, nil, nil
                    return S.at, S.count, S.stop, S.total, S.last
                end
            end
            local first, first_count, first_stop -- (the first run's)
            local total, at, position, length = 0, 0, 8, #value
            local head_total, head_last, head_first -- (an rl2 log's)
            if byte(value, 3) == 50 then -- 'rl2:sl:'
                head_total, head_last, head_first, position = part('rl2').sl(value)
            end
            -- The first run, then each one with the comma before it. A step
            -- and a count start with 1 to 9 (a leading zero is damage), but
            -- a step may be 0.
            local pattern, zero = '^([1-9]%d*):([1-9]%d*)', '^(0):([1-9]%d*)'
            while true do
                local _, stop, step, count = find(value, pattern, position)
                if not stop then
                    _, stop, step, count = find(value, zero, position)
                    if not stop then
                        fail('corrupt')
                    end
                end
                local plain = not wide and #step <= 16 and #count < 16 and step + 0
                if plain and plain < 4503599627370496 then
                    -- The usual run, read at once: a step below 2^52, a count
                    -- below 10^15 (as stored_span and stored_count read them).
                    -- The time is below 2^53, within MAX_TIME_US.
                    at, count = at + plain, count == '1' and 1 or count + 0 -- (strtod is slow)
                    if at >= 4503599627370496 then -- 2^52: the call is wide from here
                        note(at)
                    end
                    total = total + count
                    if total > 9007199254740991 then
                        fail('corrupt')
                    end
                else
                    at = add(at, stored_span(step))
                    count = stored_count(count, 1)
                    total = total + count
                    if total > 9007199254740991 or not within(at, MAX_TIME_US) then
                        fail('corrupt')
                    end
                end
                if not first then
                    if head_first then
                        -- (rl2: the first live run's time is the head's; its
                        -- own may be a step from a run before the live ones.)
                        at = head_first
                    end
                    first, first_count, first_stop = at, count, stop
                end
                if stop == length then
                    if head_total and (total ~= head_total or lt(at, head_last) or lt(head_last, at)) then
                        fail('corrupt')
                    end
                    return first, first_count, first_stop, total, at, head_total ~= nil
                end
                position, pattern, zero = stop + 1, '^,([1-9]%d*):([1-9]%d*)', '^,(0):([1-9]%d*)'
            end
        end

        -- The run after the one at time `at` whose text ends at `stop`, in a
        -- value decode has read: its time, units and text end (nil after the
        -- newest run).
        local function after(value, at, stop)
            if stop == #value then
                return nil
            end
            local _, ends, step, count = find(value, '^(%d+):(%d+)', stop + 2)
            return wide and add(at, stored_span(step)) or at + step, count == '1' and 1 or count + 0, ends
        end

        -- From the run at `at` (`count` units, text ending at `stop`): the
        -- first run still in the window (nil: none is) and the units from
        -- there on. A unit logged at s counts while s > now - w (s >= now + 1 - w).
        local function live(value, at, count, stop, total, now, w)
            local cutoff = wide and (lt(now, w) and 0 or add(minus(now, w), 1)) or (now < w and 0 or now - w + 1)
            while at and (wide and lt(at, cutoff) or not wide and at < cutoff) do
                total = total - count
                at, count, stop = after(value, at, stop)
            end
            return at, count, stop, total
        end

        -- Milliseconds until a unit logged at `at` (in the window) leaves it.
        local function leaves(now, at, w)
            return ms(wide and minus(w, minus(now, at)) or w - (now - at))
        end

        -- From the run at `at` (`count` units, text ending at `stop`), the run
        -- holding the k-th oldest unit: its time, how many of its units are
        -- among the k, and the run before it (time, text end; nil: none).
        local function kth(value, at, count, stop, k)
            local seen, before, before_stop = count, nil, nil
            while seen < k do
                before, before_stop = at, stop
                at, count, stop = after(value, at, stop)
                seen = seen + count
            end
            return at, count - (seen - k), before, before_stop
        end

        -- Logs `n` units at `now` (never before the newest run) when the
        -- units still in the window leave room; `n` = 0 (or `look`) only looks.
        local function take(value, now, limit, w, n, look, key)
            local at, count, stop, total, last, first_stop, rl2 = nil, 0, 0, 0, nil, nil, false
            if value then
                at, count, first_stop, total, last, rl2 = decode(value, key)
                if lt(now, last) then
                    now = last
                end
                at, count, stop, total = live(value, at, count, first_stop, total, now, w)
            end
            local reset = total == 0 and 0 or leaves(now, last, w)
            local remaining = total < limit and limit - total or 0
            if n > limit then
                return 0, remaining, -1, reset
            elseif total > limit - n then
                -- Until enough of the oldest units have left.
                local t = kth(value, at, count, stop, total - (limit - n))
                return 0, remaining, leaves(now, t, w), reset
            elseif n == 0 then
                return 1, remaining, 0, reset
            elseif look then
                return 1, remaining - n, 0, ms(w)
            end
            -- The runs kept as stored, the first with its time in full, then
            -- the new one. When no run has left, only the new run's text,
            -- which write_state appends to the stored value: a long string
            -- costs Redis's Lua 12 instructions a byte to make, hashed whole,
            -- and Redis's APPEND and PEXPIRE take less than its SET of the
            -- whole, even for a log of one run. Else in one format() while the
            -- times are plain.
            local new
            if not at then
                new = format('rl1:sl:%s:%d', to_text(now), n)
            elseif stop == first_stop and not wide and not rl2 then -- (an rl2 log is written whole, as rl1)
                new = format(',%d:%d', now - last, n)
                if keep and key and #value > 192 then
                    keep(key, new, at, count, total + n, now, value)
                end
                return 1, remaining - n, 0, ms(w), nil, new
            elseif not wide then
                new = format('rl1:sl:%d:%d%s,%d:%d', at, count, sub(value, stop + 1), now - last, n)
            else
                new = format('rl1:sl:%s:%d', to_text(at), count) .. sub(value, stop + 1)
                    .. format(',%s:%d', to_text(minus(now, last)), n)
            end
            if keep and key and #new > 192 then
                keep(key, new, at or now, at and count or n, total + n, now)
            end
            return 1, remaining - n, 0, ms(w), nil, new
        end

        -- Takes back the `n` newest units still in the window.
        local function refund(value, now, limit, w, n, key)
            if not value then
                return 1, limit, 0, 0
            end
            local at, count, stop, total, last = decode(value, key)
            if lt(now, last) then
                now = last
            end
            at, count, stop, total = live(value, at, count, stop, total, now, w)
            local left = total > n and total - n or 0
            local room = limit > left and limit - left or 0
            if left == 0 then
                return 1, room, 0, 0, nil, n > 0 and '' or nil -- nothing left: no key
            end
            -- The newest unit left is the `left`-th oldest one.
            local newest, newest_count, before, before_stop = kth(value, at, count, stop, left)
            local reset = leaves(now, newest, w)
            if n == 0 then
                return 1, room, 0, reset
            end
            local new
            if not before then -- (the first run holds it)
                new = format('rl1:sl:%s:%d', to_text(at), newest_count)
            else
                new = format('rl1:sl:%s:%d', to_text(at), count) .. sub(value, stop + 1, before_stop)
                    .. format(',%s:%d', to_text(minus(newest, before)), newest_count)
            end
            if keep and key and #new > 192 then
                keep(key, new, at, before and count or newest_count, left, newest)
            end
            return 1, room, 0, reset, nil, new
        end

        return {
            prefix = 'rl1:sl:', prefix2 = 'rl2:sl:', parse = window_limit,
            take = take,
            refund = refund,
        }
    elseif name == 'rl2' then
        -- The heads of the next version's layouts (`rl2:sl:`, `rl2:cc:`, the
        -- file's header), built when such a value is first read. Each holds
        -- its value's sums, which decode checks against the entries, and
        -- where the live entries start (after the head, or after a comma).
        part('base')

        -- Zero-padded digits as stored_* read them (no leading zero).
        local function unpadded(s)
            local nonzero = find(s, '[^0]')
            return nonzero and sub(s, nonzero) or '0'
        end

        -- The position of the first live entry, `offset` bytes in.
        local function start(value, offset, head_length)
            local position = offset + 1
            if position <= head_length or position > #value
                or position > head_length + 1 and byte(value, position - 1) ~= 44 then
                fail('corrupt')
            end
            return position
        end

        return {
            -- A log's units, its newest run's time, its first live run's time
            -- and position.
            sl = function(value)
                local _, _, total, last, first, offset = find(value, '^(%d+):(%d+):(%d+):(%d+):', 8)
                if not offset or #total ~= 16 or #last ~= 18 or #first ~= 18 or #offset ~= 10 then
                    fail('corrupt')
                end
                return stored_count(unpadded(total), 1), stored_time(unpadded(last)), stored_time(unpadded(first)),
                    start(value, offset, 73)
            end,
            -- A lease set's last update and next id (as rl1 holds them), its
            -- slots held, its latest end, a time at or before its earliest
            -- end, and its first lease's position. (A take that fits updates
            -- the first four, side by side.)
            cc = function(value)
                local _, _, last, next_id, held, last_end, first_end, offset =
                    find(value, '^(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):', 8)
                if not offset or #last ~= 18 or #next_id ~= 16 or #held ~= 16 or #last_end ~= 18
                    or #first_end ~= 18 or #offset ~= 10 then
                    fail('corrupt')
                end
                return unpadded(last), unpadded(next_id), stored_count(unpadded(held), 1),
                    stored_time(unpadded(last_end)), stored_time(unpadded(first_end)), start(value, offset, 109)
            end,
        }
    elseif name == 'cc' then
        -- Concurrency (src/algorithms/concurrency.rs) -------------------------
        -- Leases: `last`, the last update; `next_id`, the id the next lease gets;
        -- the leases in the order taken (ascending ids), as arrays: `ids`, `ends`
        -- (Unix microseconds), `slots`, and `stops`, where each one's text ends in
        -- the stored value. A lease that ends at E holds its slots while t < E.
        -- No lease left is no key: ids start again at 1. The sixth field of a
        -- reply is the new lease's id (0: none taken). The commands pass the
        -- key too, for the sets a function library keeps (`written`).
        part('base')
        -- (table.concat and table.sort are read as globals on the rare paths
        -- using them: a local for each would be one more upvalue built on every
        -- EVALSHA call.)

        -- The limit and the lease.
        local function parse(a, b)
            return parse_size(a, 'limit'), parse_span(b, 1000, 'lease')
        end

        -- The leases decode reads, in a table and arrays used again by the
        -- next call (a call reads its keys one at a time; entries past `count`
        -- are left from before), made when first needed. Those of a key
        -- holding many are let go. (Made with its fields and room for four
        -- leases: under EVALSHA it is made on every call that reads leases one
        -- by one, and a table given keys one by one is grown at each power of
        -- two.)
        local kept

        -- The leases of the value this library last wrote to a key, by key: a
        -- value read back as it was written (the entry's `value`) needs no
        -- reading. Kept by a function library (FCALL), for sets of up to 256
        -- leases, each counting its leases and 8 more (its tables) towards a
        -- size of at most 32,768 (a few MB of Lua memory; past that it starts
        -- again). Each entry is what decode would read from its value.
        local written, written_size = lasting and {}, 0

        -- Only what a command could have stored: at least one lease, each live
        -- at the last update and for at most the longest lease after it, of at
        -- least 1 slot, 2^53 - 1 in all; ids rising from 1, below the next id,
        -- which is at most 2^53 (the one number past 2^53 - 1 a double holds
        -- exactly).
        -- With `sums` (and no set kept by key), only the sums are read, in a
        -- table of their own, with no arrays (no `ids`).
        local function decode(value, key, sums)
            local L = written and key and written[key]
            if L and L.value == value then
                return L
            end
            local _, stop, last, next_id
            local head_held, head_first, head_last -- (an rl2 set's)
            if byte(value, 3) == 50 then -- 'rl2:cc:'
                last, next_id, head_held, head_last, head_first, stop = part('rl2').cc(value)
                stop = stop - 1 -- (where the head ends)
            else
                _, stop, last, next_id = find(value, '^(%d+):(%d+):', 8)
            end
            if not stop then
                fail('corrupt')
            end
            last = stored_time(last)
            next_id = next_id == '9007199254740992' and next_id + 0 or stored_count(next_id, 1)
            if sums and not written then
                L = { last = last, next_id = next_id, first = stop + 1, count = 0, held = 0, first_end = false, last_end = false }
            else
                if not kept or kept.ids[257] then -- (a damaged long set's, read last)
                    kept = {
                        ids = { nil, nil, nil, nil },
                        ends = { nil, nil, nil, nil },
                        slots = { nil, nil, nil, nil },
                        stops = { nil, nil, nil, nil },
                        last = 0, next_id = 0, first = 0, count = 0, held = 0, first_end = 0, last_end = 0,
                    }
                end
                L = kept
                L.last, L.next_id, L.first, L.first_end = last, next_id, stop + 1, nil
            end
            local ids, ends, slots, stops = L.ids, L.ends, L.slots, L.stops
            local count, total, previous, length = 0, 0, 0, #value
            -- (plain: every lease read at once so far; a lease that is not
            -- turns the rest to the exact reading. first_end, last_end: the
            -- earliest and the latest end so far, either way.)
            local position, first_end, last_end, plain = L.first, nil, nil, not wide
            -- The first lease, then each one with the comma before it. Each
            -- field starts with 1 to 9: a leading zero is damage.
            local pattern = '^([1-9]%d*):([1-9]%d*):([1-9]%d*)'
            while true do
                local id, end_text, n
                _, stop, id, end_text, n = find(value, pattern, position)
                if not stop then
                    fail('corrupt')
                end
                local ends_at = plain and #id < 16 and #n < 16 and #end_text <= 16 and end_text + 0
                if ends_at and ends_at < 4503599627370496 then
                    -- The usual lease, read at once: an id and slots below
                    -- 10^15, an end below 2^52 (as stored_count and stored_span
                    -- read them; a plain span is within MAX_SPAN_US). A double
                    -- of 16 digits is below 2^52 only when they are.
                    id, n = id + 0, n == '1' and 1 or n + 0 -- (strtod is slow)
                    total = total + n
                    if id <= previous or total > 9007199254740991 or ends_at <= last then
                        fail('corrupt')
                    end
                    first_end = (not first_end or ends_at < first_end) and ends_at or first_end
                    last_end = (not last_end or ends_at > last_end) and ends_at or last_end
                else
                    plain = false
                    id, ends_at, n = stored_count(id, 1), stored_span(end_text), stored_count(n, 1)
                    total = total + n
                    if id <= previous or total > 9007199254740991 or not lt(last, ends_at)
                        or not within(minus(ends_at, last), MAX_SPAN_US) then
                        fail('corrupt')
                    end
                    first_end = (not first_end or lt(ends_at, first_end)) and ends_at or first_end
                    last_end = (not last_end or lt(last_end, ends_at)) and ends_at or last_end
                end
                count = count + 1
                if ids then
                    ids[count], ends[count], slots[count], stops[count] = id, ends_at, n, stop
                end
                previous = id
                if stop == length then
                    break
                end
                position, pattern = stop + 1, '^,([1-9]%d*):([1-9]%d*):([1-9]%d*)'
            end
            if next_id <= previous or head_held and (total ~= head_held or lt(first_end, head_first)
                    or lt(last_end, head_last) or lt(head_last, last_end)) then
                fail('corrupt')
            end
            -- The sums (every lease live at the last update): at and encode
            -- need not go through the leases while `now` is before the first end.
            L.count, L.held, L.first_end, L.last_end = count, total, plain and first_end or nil, last_end
            if count > 256 and ids then
                kept = nil
            end
            return L
        end

        -- Slots held at `now`, milliseconds until every live lease but lease
        -- `except` has run out, and the index of lease `except` when live.
        local function at(L, now, except)
            if L and L.first_end and not wide and now < L.first_end then
                -- Every lease live: the sums decode or encode left, and lease
                -- `except` found by its id (the ids ascend). The latest end of
                -- the others is the last end unless `except` holds it.
                if not except then
                    return L.held, ms(L.last_end - now)
                end
                local ids, count, found = L.ids, L.count, nil
                if count == 1 then
                    if ids[1] == except then
                        return L.held, 0, 1 -- (no other lease)
                    end
                else
                    local low, high = 1, count
                    while low <= high do
                        local middle = low + high
                        middle = (middle - middle % 2) / 2
                        local id = ids[middle]
                        if id < except then
                            low = middle + 1
                        elseif id > except then
                            high = middle - 1
                        else
                            found, low = middle, high + 1
                        end
                    end
                end
                if not found or L.ends[found] < L.last_end then
                    return L.held, ms(L.last_end - now), found
                end
            end
            local held, latest, found = 0, nil, nil
            if L then
                local ids, ends, slots, plain = L.ids, L.ends, L.slots, not wide
                for i = 1, L.count do
                    local ends_at = ends[i]
                    if plain and now < ends_at or not plain and lt(now, ends_at) then
                        held = held + slots[i]
                        if ids[i] == except then
                            found = i
                        elseif not latest or plain and latest < ends_at or not plain and lt(latest, ends_at) then
                            latest = ends_at
                        end
                    end
                end
            end
            return held, latest and ms(minus(latest, now)) or 0, found
        end

        -- The value after a change at `now`: the leases still live but the
        -- lease at index `gone`, lease `renewed` ending at `renewed_end`, then a new lease
        -- (`added_id`, ending at `added_end`, holding `added_slots`).
        -- Stretches of leases left as they were are copied from the old value.
        -- A function library keeps the new value's leases in `written[key]`,
        -- N: L itself, each lease moved to its place in the new value as the
        -- loop passes it (at or before where it was), or new arrays for a key
        -- that held none; with their sums (slots held, the first and the last
        -- end), so that the next call finding every lease live reads none.
        -- encode's pieces when leases are left out or changed, made then and used
        -- again (entries past its `n` are left from before).
        local pieces
        local function encode(key, value, L, now, next_id, gone, renewed, renewed_end, added_id, added_end, added_slots)
            local plain = not wide
            local head = plain and format('rl1:cc:%d:%d:', now, next_id)
                or format('rl1:cc:%s:%s:', to_text(now), to_text(next_id))
            local old = written and key and written[key]
            local old_size = old and old.count + 8 -- (before N, which may be old, changes)
            local N = lasting and plain and key and (L or { ids = {}, ends = {}, slots = {}, stops = {} })
            -- The new value's pieces; its leases, where the last one ends, and
            -- N's sums.
            local n, from, whole = 0, nil, nil -- (whole: all the old leases' text)
            local count, stop, held, first_end, last_end = 0, #head - 1, 0, nil, nil
            if plain and L and L.first_end and not gone and not renewed and now < L.first_end then
                -- Every lease live: copied whole, and L's arrays (for N) as
                -- they are, their ends moved by the change of the head's length.
                count, held, first_end, last_end = L.count, L.held, L.first_end, L.last_end
                whole = sub(value, L.first)
                if N then
                    local stops, shift = L.stops, #head + 1 - L.first
                    if shift ~= 0 then
                        for i = 1, count do
                            stops[i] = stops[i] + shift
                        end
                    end
                    stop = stops[count]
                end
            elseif plain and gone and L.count > 1 and L.first_end and now < L.first_end then
                -- Every lease live but lease `gone`, let go: the text before it
                -- and after it, and L's arrays (for N) without it, the ends
                -- after it moved back by its text and a comma.
                local stops, ends = L.stops, L.ends
                local start = gone == 1 and L.first or stops[gone - 1] + 2
                local before = gone > 1 and sub(value, L.first, start - 2)
                local after = gone < L.count and sub(value, stops[gone] + 2)
                whole = before and after and before .. ',' .. after or before or after or nil
                count, held = L.count - 1, L.held - L.slots[gone]
                first_end, last_end = L.first_end, L.last_end
                if N then
                    local ids, slots, shift, gone_end = L.ids, L.slots, #head + 1 - L.first, ends[gone]
                    local cut = stops[gone] - start + 2
                    for i = 1, gone - 1 do
                        stops[i] = stops[i] + shift
                    end
                    for i = gone, count do
                        ids[i], ends[i], slots[i], stops[i] = ids[i + 1], ends[i + 1], slots[i + 1], stops[i + 1] + shift - cut
                    end
                    if gone_end == first_end or gone_end == last_end then
                        first_end, last_end = ends[1], ends[1]
                        for i = 2, count do
                            local ends_at = ends[i]
                            first_end = ends_at < first_end and ends_at or first_end
                            last_end = ends_at > last_end and ends_at or last_end
                        end
                    end
                end
            elseif L then
                pieces = pieces or {}
                local ids, ends, slots, stops = L.ids, L.ends, L.slots, L.stops
                local previous = L.first - 2 -- (where the lease before ends in the old value)
                for i = 1, L.count do
                    local start, id, ends_at, taken = previous + 2, ids[i], ends[i], slots[i]
                    previous = stops[i]
                    local length -- of its text in the new value, for N
                    if (plain and now < ends_at or not plain and lt(now, ends_at)) and i ~= gone and id ~= renewed then
                        from = from or start
                        length = N and previous - start + 1
                    else
                        if from then
                            n = n + 1
                            pieces[n] = sub(value, from, start - 2)
                            from = nil
                        end
                        if id == renewed then
                            local text = plain and format('%d:%d:%d', id, renewed_end, taken)
                                or format('%d:%s:%d', id, to_text(renewed_end), taken)
                            n = n + 1
                            pieces[n] = text
                            ends_at, length = renewed_end, N and #text
                        end
                    end
                    if length then
                        count, stop, held = count + 1, stop + 1 + length, held + taken
                        ids[count], ends[count], slots[count], stops[count] = id, ends_at, taken, stop
                        first_end = (not first_end or ends_at < first_end) and ends_at or first_end
                        last_end = (not last_end or ends_at > last_end) and ends_at or last_end
                    end
                end
                if from then
                    n = n + 1
                    pieces[n] = sub(value, from, previous)
                end
            end
            local added -- the new lease's text
            if added_id then
                added = plain and format('%d:%d:%d', added_id, added_end, added_slots)
                    or format('%d:%s:%d', added_id, to_text(added_end), added_slots)
                if N then
                    count, stop, held = count + 1, stop + 1 + #added, held + added_slots
                    N.ids[count], N.ends[count], N.slots[count], N.stops[count] = added_id, added_end, added_slots, stop
                    first_end = (not first_end or added_end < first_end) and added_end or first_end
                    last_end = (not last_end or added_end > last_end) and added_end or last_end
                end
            end
            local new
            if whole then
                new = added and head .. whole .. ',' .. added or head .. whole
            elseif n == 0 then
                new = head .. (added or '')
            else
                if added then
                    n = n + 1
                    pieces[n] = added
                end
                new = head .. table.concat(pieces, ',', 1, n)
                if n > 256 then
                    pieces = nil
                end
            end
            -- (No lease left is no key: nothing to keep.)
            if N and count > 0 and count <= 256 then
                N.value, N.last, N.next_id, N.first, N.count = new, now, next_id, #head + 1, count
                N.held, N.first_end, N.last_end = held, first_end, last_end
                if N == kept then
                    kept = nil
                end
                written_size = written_size - (old_size or 0) + count + 8
                if written_size > 32768 then
                    written, written_size = {}, count + 8
                end
                written[key] = N
            elseif old then
                written[key], written_size = nil, written_size - old_size
            end
            return new
        end

        -- RL.ACQUIRE: `n` slots under a new lease when at most `limit` are then
        -- held; `n` = 0 (or `look`) only looks. The sums are enough when every
        -- lease is live and n more fit; else the leases are read one by one.
        local function take(value, now, limit, lease, n, look, key)
            local L = value and decode(value, key, true)
            if L and lt(now, L.last) then
                now = L.last -- (never before the last update)
            end
            if L and not L.ids and not (L.first_end and not wide and now < L.first_end and L.held <= limit - n) then
                L = decode(value, key)
            end
            local held, reset = at(L, now)
            local remaining = held < limit and limit - held or 0
            if n > limit then
                return 0, remaining, -1, reset, 0
            elseif held > limit - n then
                -- Wait for the leases that run out first until n fit.
                local live, ends, slots = {}, L.ends, L.slots
                for i = 1, L.count do
                    if lt(now, ends[i]) then
                        live[#live + 1] = i
                    end
                end
                table.sort(live, function(a, b)
                    return lt(ends[a], ends[b])
                end)
                local must, freed, retry = held - (limit - n), 0, reset
                for j = 1, #live do
                    local i = live[j]
                    freed = freed + slots[i]
                    if freed >= must then
                        retry = ms(minus(ends[i], now))
                        break
                    end
                end
                return 0, remaining, retry, reset, 0
            end
            local id = held == 0 and 1 or L.next_id
            if n > 0 and id > 9007199254740991 then
                -- Every id was given out: they start again once no lease is left.
                return 0, remaining, reset, reset, 0
            elseif n == 0 then
                return 1, remaining, 0, reset, 0
            end
            local ends_at = add(now, lease)
            local lasts = ms(lease)
            if lt(reset, lasts) then
                reset = lasts
            end
            if look then
                return 1, remaining - n, 0, reset, 0 -- a look holds no lease
            elseif L and not L.ids and wide then
                L = decode(value, key) -- (the new lease's end made the call wide)
            end
            return 1, remaining - n, 0, reset, id, encode(key, value, L, now, id + 1, nil, nil, nil, id, ends_at, n)
        end

        -- (RL.RELEASE and RL.RENEW, in the leases part, go through the leases
        -- with these.)
        return {
            prefix = 'rl1:cc:', prefix2 = 'rl2:cc:',
            parse = parse,
            take = take,
            decode = decode,
            at = at,
            encode = encode,
        }
    elseif name == 'commands' then
        -- Commands ------------------------------------------------------------
        -- Each parses its arguments in the module's order (so that a call with
        -- several bad ones gets the module's error), reads its keys, decides, and
        -- writes once everything is decided. RL.TOKENBUCKET and the other single
        -- limits are here; RL.PEEK with RL.REFUND, RL.MULTI, and RL.RELEASE with
        -- RL.RENEW in parts of their own after this one, built when called (under
        -- EVALSHA a call builds only its own).
        part('base')
        -- (type, string.upper, tostring, getmetatable and error are read as
        -- globals: they are on rare paths, and a local taken for them would be
        -- one more upvalue built on every EVALSHA call.)
        local pcall = pcall

        function arity(command)
            return 'ERR wrong number of arguments for \'' .. command .. '\' command'
        end

        -- A limit's reply: [allowed, remaining, size, retry_after_ms,
        -- reset_after_ms] and, for a leaky bucket or a concurrency limit, a
        -- sixth field. A wait past 2^53 - 1 ms (limbs, in a wide call) cannot
        -- be returned exactly: check, called in a wide call only.
        function check(retry, reset, sixth)
            if type(retry) ~= 'number' or type(reset) ~= 'number' or (sixth and type(sixth) ~= 'number') then
                fail('reply_range')
            end
        end

        function fields(size, allowed, remaining, retry, reset, sixth)
            if wide then
                check(retry, reset, sixth)
            end
            return { allowed, remaining, size, retry, reset, sixth }
        end

        -- The part a command is in: for RL.TOKENBUCKET, RL.LEAKYBUCKET,
        -- RL.FIXEDWINDOW, RL.SLIDINGWINDOW, RL.SLIDINGLOG and RL.ACQUIRE (key a b
        -- now [n]) the part of their algorithm, which `take` below calls (the
        -- algorithms' parts have two-letter names); else the part holding the
        -- command. (The names are compared in turn: under EVALSHA a table of
        -- them would be made on every call, some 4,600 instructions.)
        local function part_of(name)
            if name == 'RL.TOKENBUCKET' then
                return 'tb'
            elseif name == 'RL.MULTI' then
                return 'multi'
            elseif name == 'RL.SLIDINGWINDOW' then
                return 'sw'
            elseif name == 'RL.FIXEDWINDOW' then
                return 'fw'
            elseif name == 'RL.ACQUIRE' then
                return 'cc'
            elseif name == 'RL.RELEASE' or name == 'RL.RENEW' then
                return 'leases'
            elseif name == 'RL.SLIDINGLOG' then
                return 'sl'
            elseif name == 'RL.LEAKYBUCKET' then
                return 'lb'
            elseif name == 'RL.PEEK' or name == 'RL.REFUND' then
                return 'named'
            end
        end

        -- A limit's `a` and `b` as the algorithm `A` parses them. They repeat
        -- from call to call: a function library keeps the parse of up to 1000
        -- pairs an algorithm (past that it starts again), unless wide.
        local kept, pairs_kept
        function parse_limit(A, a, b)
            local memo = kept and kept[A]
            local hit = memo and memo[a]
            hit = hit and hit[b]
            if hit then
                return hit[1], hit[2]
            end
            local size, per = A.parse(a, b)
            if lasting and not wide then
                kept, pairs_kept = kept or {}, pairs_kept or {}
                if not memo or pairs_kept[A] >= 1000 then
                    memo = {}
                    kept[A], pairs_kept[A] = memo, 0
                end
                local by_b = memo[a] or {}
                memo[a], by_b[b], pairs_kept[A] = by_b, { size, per }, pairs_kept[A] + 1
            end
            return size, per
        end

        local function take(keys, argv, name, code)
            if #keys ~= 1 or #argv < 4 then
                fail(arity(name))
            end
            local A = part(code)
            local size, per = parse_limit(A, argv[2], argv[3])
            local now = now_us(argv[4])
            if #argv > 5 then
                fail(arity(name))
            end
            local n = argv[5] == nil and 1 or parse_count(argv[5]) or fail('count')
            local key = keys[1]
            local allowed, remaining, retry, reset, sixth, new = A.take(read_state(key, A), now, size, per, n, nil, key)
            local reply = fields(size, allowed, remaining, retry, reset, sixth)
            if new then
                write_state(key, new, reset)
            end
            return reply
        end

        -- A call: the command's reply, or its error as an error reply.
        function call(keys, argv)
            wide = false -- (each call starts plain)
            local name = argv[1] or ''
            local code = part_of(name)
            if not code then
                name = string.upper(name)
                code = part_of(name)
            end
            local command = code and (#code == 2 and take or part(code)[name])
            if not command then
                return redis.error_reply('ERR unknown command \'' .. tostring(argv[1]) .. '\' for redis-ratelimit script mode')
            end
            local ok, result = pcall(command, keys, argv, name, code)
            if ok then
                return result
            elseif getmetatable(result) == Failure then
                return redis.error_reply(result.message)
            end
            error(result, 0)
        end

        return true
    elseif name == 'named' then
        -- Limits named in a call: RL.PEEK, RL.REFUND, and their parsing for RL.MULTI
        part('commands')

        -- The part of the algorithm `name` (nil: none). (Compared in turn: under
        -- EVALSHA a table of the names would be made on every call. string.upper,
        -- on a rare path, is read as a global: a local for it would be one more
        -- upvalue built on every EVALSHA call.)
        local function algorithm(name)
            if name == 'TOKENBUCKET' then
                return 'tb'
            elseif name == 'FIXEDWINDOW' then
                return 'fw'
            elseif name == 'SLIDINGWINDOW' then
                return 'sw'
            elseif name == 'CONCURRENCY' then
                return 'cc'
            elseif name == 'SLIDINGLOG' then
                return 'sl'
            elseif name == 'LEAKYBUCKET' then
                return 'lb'
            end
        end

        -- A limit named in the call: its algorithm's part, size and per. (A
        -- function library keeps the parts by the names written in capitals.)
        local by_name = lasting and {}
        function named_limit(name, a, b)
            local A = by_name and by_name[name]
            if not A then
                local code = algorithm(name)
                A = part(code or algorithm(string.upper(name)) or fail('algorithm'))
                if code and by_name then
                    by_name[name] = A
                end
            end
            return A, parse_limit(A, a, b)
        end

        function count_or_one(s)
            return s == nil and 1 or parse_count(s) or fail('count')
        end

        -- RL.PEEK key ALGORITHM a b now [n]: a take that changes nothing.
        local function peek(keys, argv)
            if #keys ~= 1 or #argv < 5 then
                fail(arity('RL.PEEK'))
            end
            local A, size, per = named_limit(argv[2], argv[3], argv[4])
            local now = now_us(argv[5])
            if #argv > 6 then
                fail(arity('RL.PEEK'))
            end
            local n = count_or_one(argv[6])
            return fields(size, A.take(read_state(keys[1], A), now, size, per, n, true, keys[1]))
        end

        -- RL.REFUND key ALGORITHM a b now n
        local function refund(keys, argv)
            if #keys ~= 1 or #argv ~= 6 then
                fail(arity('RL.REFUND'))
            end
            local A, size, per = named_limit(argv[2], argv[3], argv[4])
            local now = now_us(argv[5])
            local n = count_or_one(argv[6])
            if not A.refund then
                fail('refund_concurrency') -- a slot comes back by its lease's id
            end
            local key = keys[1]
            local allowed, remaining, retry, reset, sixth, new = A.refund(read_state(key, A), now, size, per, n, key)
            local reply = fields(size, allowed, remaining, retry, reset, sixth)
            if new then
                write_state(key, new, reset)
            end
            return reply
        end

        return { ['RL.PEEK'] = peek, ['RL.REFUND'] = refund }
    elseif name == 'multi' then
        -- RL.MULTI numkeys key [key ...] now ALGORITHM a b n [ALGORITHM a b n ...]:
        -- every limit decides on what it reads, and only when all of them admit
        -- are their writes made.
        part('named')

        -- Whether a key appears twice (a few keys compared pairwise, more
        -- through a set left empty for the next call).
        local seen = {}
        local function repeated(keys, k)
            if k <= 2 then
                return k == 2 and keys[1] == keys[2] -- (the usual case, at once)
            end
            local twice = false
            if k <= 8 then
                for i = 2, k do
                    for j = 1, i - 1 do
                        twice = twice or keys[i] == keys[j]
                    end
                end
                return twice
            end
            for i = 1, k do
                twice = twice or seen[keys[i]] ~= nil
                seen[keys[i]] = true
            end
            for i = 1, k do
                seen[keys[i]] = nil
            end
            return twice
        end

        -- The limits' arrays are used again by each call (made with room for
        -- two limits: under EVALSHA they are made on every call, and an array
        -- given its entries one by one is grown at each power of two); a
        -- function library answers with the same reply tables too (Redis has
        -- read a reply before the next call), making none.
        local limits, sizes, pers = { nil, nil }, { nil, nil }, { nil, nil }
        local counts, values, news = { nil, nil }, { nil, nil }, { nil, nil }
        local kept_reply = lasting and {}
        local function multi(keys, argv)
            local k = #keys
            if 1 + k + #argv < 8 then
                fail(arity('RL.MULTI'))
            end
            -- At most 1000 keys, as the module: a call runs alone on the server.
            if k == 0 or k > 1000 then
                fail('numkeys')
            end
            if #argv ~= 2 + 4 * k then
                fail(arity('RL.MULTI'))
            end
            for i = 1, k do
                local at = 4 * i - 1
                limits[i], sizes[i], pers[i] = named_limit(argv[at], argv[at + 1], argv[at + 2])
                local n = argv[at + 3] -- (most often 1)
                counts[i] = n == '1' and 1 or count_or_one(n)
            end
            local now = now_us(argv[2])
            if repeated(keys, k) then
                fail('repeated')
            end
            for i = 1, k do
                values[i] = read_state(keys[i], limits[i])
            end
            local reply, allowed = kept_reply, true
            if reply then
                reply[1], reply[2], reply[3 + k] = 1, 0, nil -- (Redis reads up to the first nil)
            else
                reply = { 1, 0, nil, nil } -- (room for two limits)
            end
            for i = 1, k do
                local admitted, remaining, retry, reset, sixth
                admitted, remaining, retry, reset, sixth, news[i] = limits[i].take(values[i], now, sizes[i], pers[i], counts[i], nil, keys[i])
                local f = reply[2 + i]
                if f then
                    f[1], f[2], f[3], f[4], f[5], f[6] = admitted, remaining, sizes[i], retry, reset, sixth
                else
                    reply[2 + i] = { admitted, remaining, sizes[i], retry, reset, sixth }
                end
                allowed = allowed and admitted == 1
            end
            if not allowed or wide then
                -- (An admitted plain call has nothing more to do here.)
                local retry = 0
                for i = 1, k do
                    local f = reply[2 + i]
                    if not allowed and f[1] == 1 then
                        -- Nothing is taken: a limit that would admit reports its
                        -- state as a look (n = 0) does.
                        f[1], f[2], f[4], f[5], f[6] = limits[i].take(values[i], now, sizes[i], pers[i], 0)
                    end
                    if wide then
                        check(f[4], f[5], f[6])
                    end
                    if retry ~= -1 and (f[4] == -1 or f[4] > retry) then
                        retry = f[4]
                    end
                end
                if not allowed then
                    reply[1], reply[2] = 0, retry
                end
            end
            for i = 1, k do
                if allowed and news[i] then
                    write_state(keys[i], news[i], reply[2 + i][5])
                end
                values[i], news[i] = nil, nil
            end
            return reply
        end

        return { ['RL.MULTI'] = multi }
    elseif name == 'leases' then
        -- RL.RELEASE key lease_id now, RL.RENEW key lease_id lease now:
        -- [released or renewed, held, reset_after_ms]. One function for both
        -- (under EVALSHA each function is one more closure a call).
        part('commands')

        -- RL.RENEW's lease, its parse kept by a function library as a limit's
        -- pair is.
        local LEASE = lasting and {
            parse = function(a)
                return parse_span(a, 1000, 'lease')
            end,
        }

        local function command(keys, argv, name)
            local renew = name == 'RL.RENEW'
            if #keys ~= 1 or #argv ~= (renew and 4 or 3) then
                fail(arity(name))
            end
            local id = parse_count(argv[2]) or fail('lease_id')
            local lease = renew and (LEASE and parse_limit(LEASE, argv[3], '') or parse_span(argv[3], 1000, 'lease'))
            local now = now_us(argv[renew and 4 or 3])
            local key, C = keys[1], part('cc')
            local value = read_state(key, C)
            -- Lease `id`, when still held at `now`: RL.RELEASE frees it, RL.RENEW
            -- makes it run out at `now + lease`.
            local L = value and C.decode(value, key)
            if L and lt(now, L.last) then
                now = L.last
            end
            local held, others, found = C.at(L, now, id)
            if not found then
                return { 0, held, others }
            end
            local reset, new = others, nil
            if renew then
                reset = ms(lease)
                if lt(reset, others) then
                    reset = others
                end
                new = C.encode(key, value, L, now, L.next_id, nil, id, add(now, lease))
            else
                held = held - L.slots[found] -- (before encode, which may reuse L)
                new = C.encode(key, value, L, now, L.next_id, found)
            end
            write_state(key, new, reset)
            return { 1, held, reset }
        end

        return { ['RL.RELEASE'] = command, ['RL.RENEW'] = command }
    end
end

-- The part `name`, built on first use. (`built` starts with room for the
-- three or four parts most calls build: under EVALSHA it is made on every
-- call, and a table given keys one by one is grown at each power of two.)
local built = { base = false, commands = false, errors = false }
part = function(name)
    local p = built[name]
    if not p then
        if not find then
            find, sub, byte, format = string.find, string.sub, string.byte, string.format
            fmod, floor = math.fmod, math.floor
        end
        p = build(name)
        built[name] = p
    end
    return p
end

-- The call --------------------------------------------------------------------
-- As a function library (FUNCTION LOAD runs this top level once, seeing no
-- global but `redis` on Redis 7.0), the parts are built at the first calls
-- and kept; under EVAL and EVALSHA, redis.register_function is nil and
-- the call is answered at once, building only the parts it uses.

if redis.register_function then
    lasting = true
    redis.register_function {
        function_name = RATELIMIT_FUNCTION,
        callback = function(keys, args)
            if not call then
                part('commands')
            end
            return call(keys, args)
        end,
    }
    return
end
part('commands')
return call(KEYS, ARGV)
