"""The in-process limiter of on_unavailable="local" (local.py) against the
module: the same random RL.MULTI calls (concurrency limits among them),
RL.RELEASE and RL.RENEW calls, with the same given times, on a real server with the
module and in process; every reply field for field."""

from __future__ import annotations

import random
import time
from decimal import ROUND_DOWN, Decimal
from typing import Any

import pytest
import redis

from redis_ratelimit_client import Decision, Limit, RateLimiter, rate_limit_headers
from redis_ratelimit_client.local import LocalLimiter, micros, share
from servers import Server

PARAMETERS = {  # (size, rate or window) choices per algorithm: small and large, whole and fractional
    "tokenbucket": [(1, "1"), (5, "0.5"), (10, "2.5"), (3, "0.001"), (9007199254740991, "1000000")],
    "leakybucket": [(1, "1"), (5, "0.5"), (10, "2.5"), (3, "0.001")],
    "fixedwindow": [(1, "1"), (5, "2"), (10, "0.25"), (3, "7.5")],
    "slidingwindow": [(1, "1"), (5, "2"), (10, "0.25"), (3, "7.5"), (1000, "3")],
    "slidinglog": [(1, "1"), (5, "2"), (10, "0.25"), (3, "7.5")],
    "concurrency": [(1, "1"), (3, "0.5"), (5, "2.5"), (2, "0.05"), (4, "0.25"), (2, "0.001")],
}


def persisted(r: redis.Redis, keys: list[str], args: list[object]) -> Any:
    """The call's reply, its keys made persistent in the same transaction:
    Redis expires a key by its own clock, the test gives its own times (an
    expiry of a millisecond would otherwise pass between two calls that are
    a microsecond apart in the given time)."""
    pipe = r.pipeline(transaction=True)
    pipe.execute_command(*args)  # type: ignore[no-untyped-call]
    for key in keys:
        pipe.persist(key)
    return pipe.execute()[0]


def test_a_decimal_is_read_in_millionths_as_the_module_reads_it() -> None:
    """src/args.rs's micros: half up at the seventh decimal, ASCII digits
    and one dot only (Python's int() would take a sign, spaces, `_` and
    other scripts' digits)."""
    read = ["1700000000.25", "1700000000.123456", "0.0000005", "0.0000004999", "2.4999995", "2.4999994", ".5", "3.", "0.9999999", "0"]
    assert [micros(text) for text in read] == [
        1_700_000_000_250_000, 1_700_000_000_123_456, 1, 0, 2_500_000, 2_499_999, 500_000, 3_000_000, 1_000_000, 0]
    for bad in ["", ".", "-1", "+1", " 1", "1 ", "1_0", "1.2_5", "1.-5", "1.+5", "1e3", "inf", "NaN", "1..2", "1.2.3", "1,5", "\u0661", "1\n"]:
        with pytest.raises(ValueError, match=r"^not a decimal: "):
            micros(bad)


@pytest.mark.parametrize("seed", range(8))
def test_the_local_limiter_replies_as_the_module_does(module_server: Server, seed: int) -> None:
    rng = random.Random(seed)
    r = redis.Redis(port=module_server.port, decode_responses=True)
    r.flushall()
    local = LocalLimiter()
    keys = {}
    for i in range(8):
        algorithm = "concurrency" if i < 2 else rng.choice(list(PARAMETERS))  # leases in every run
        size, parameter = rng.choice(PARAMETERS[algorithm])
        keys[f"{{k}}:{i}"] = (algorithm, size, parameter)
    now_us = int(time.time()) * 1_000_000 + rng.randrange(1_000_000)
    leases: list[tuple[str, int]] = []
    released = freed = renewals = renewed = 0
    for step in range(1500):
        now_us += rng.choice([0, 1, rng.randrange(1000), rng.randrange(300_000), rng.randrange(3_000_000)])
        chosen = rng.sample(sorted(keys), rng.randint(1, 3))
        specs = []
        for key in chosen:
            algorithm, size, parameter = keys[key]
            n = min(rng.choice([0, 1, 1, 2, rng.randint(0, min(size, 12)), size, size + 1]), 9007199254740991)
            specs.append((algorithm, size, parameter, n))
        args: list[object] = ["RL.MULTI", len(chosen), *chosen, f"{now_us // 1_000_000}.{now_us % 1_000_000:06d}"]
        for algorithm, size, parameter, n in specs:
            args += [algorithm.upper(), size, parameter, n]
        expected = persisted(r, chosen, args)
        assert local.multi(chosen, now_us, specs) == expected, (seed, step, args)
        leases += [(key, fields[5]) for key, (algorithm, *_), fields in zip(chosen, specs, expected[2:]) if algorithm == "concurrency" and fields[5]]
        if leases and rng.random() < 0.3:  # a lease given back: held, run out, released already, or an id never given
            key, lease_id = rng.choice(leases)
            lease_id = rng.choice([lease_id, lease_id, lease_id + 1, 0])
            released += 1
            release = ["RL.RELEASE", key, lease_id, f"{now_us // 1_000_000}.{now_us % 1_000_000:06d}"]
            expected = persisted(r, [key], release)
            assert local.release(key, lease_id, now_us) == expected, (seed, step, release)
            freed += expected[0]
        if leases and rng.random() < 0.3:  # a lease renewed, for its own lease, a shorter or a longer one
            key, lease_id = rng.choice(leases)
            lease_id = rng.choice([lease_id, lease_id, lease_id + 1, 0])
            lease = rng.choice([keys[key][2], "0.001", "0.3", "5", "1000000000000"])
            renewals += 1
            renew = ["RL.RENEW", key, lease_id, lease, f"{now_us // 1_000_000}.{now_us % 1_000_000:06d}"]
            expected = persisted(r, [key], renew)
            assert local.renew(key, lease_id, micros(lease), now_us) == expected, (seed, step, renew)
            renewed += expected[0]
    assert released > 100 and freed > 50, (released, freed)  # the releases ran, and many freed a held lease
    assert renewals > 100 and renewed > 30, (renewals, renewed)
    r.close()


def test_a_key_of_another_algorithm_is_refused_as_the_module_does(module_server: Server) -> None:
    r = redis.Redis(port=module_server.port, decode_responses=True)
    local = LocalLimiter()
    now_us = 1_700_000_040_000_000  # the start of a 60 s window
    assert local.multi(["k"], now_us, [("fixedwindow", 5, "60", 1)]) == [1, 0, [1, 4, 5, 0, 60_000]]
    r.execute_command("RL.MULTI", 1, "k", "1700000040", "FIXEDWINDOW", 5, 60, 1)  # type: ignore[no-untyped-call]
    with pytest.raises(redis.ResponseError) as module:
        r.execute_command("RL.MULTI", 1, "k", "1700000040", "TOKENBUCKET", 5, 1, 1)  # type: ignore[no-untyped-call]
    for call in (
        lambda: local.multi(["k"], now_us, [("tokenbucket", 5, "1", 1)]),
        lambda: local.release("k", 1, now_us),
        lambda: local.renew("k", 1, 5_000_000, now_us),
    ):
        with pytest.raises(redis.ResponseError) as in_process:
            call()
        assert str(in_process.value) == str(module.value)
    # Nothing changed: the window still holds its one unit.
    assert local.multi(["k"], now_us, [("fixedwindow", 5, "60", 0)]) == [1, 0, [1, 4, 5, 0, 60_000]]
    r.close()


def divided(algorithm: str, size: int, parameter: str, instances: int) -> tuple[int, str]:
    """docs/clients.md's share of one of `instances` processes, worked out
    here in decimals: floor(limit / instances), at least 1; a bucket's
    rate / instances rounded down to six decimals, at least 0.000001."""
    share = max(1, size // instances)
    if algorithm not in ("tokenbucket", "leakybucket"):
        return share, parameter
    rate = max(Decimal("0.000001"), (Decimal(parameter) / instances).quantize(Decimal("0.000001"), rounding=ROUND_DOWN))
    return share, format(rate.normalize(), "f")


@pytest.mark.parametrize("seed", range(4))
def test_the_local_limiter_divides_each_limit_among_instances(module_server: Server, seed: int) -> None:
    """The same random calls, to the module with each limit divided as the
    spec says (worked out above) and in process with the whole limits and
    `instances` (local.share, as the limiter divides them): every reply the same."""
    rng = random.Random(seed)
    r = redis.Redis(port=module_server.port, decode_responses=True)
    r.flushall()
    local = LocalLimiter()
    instances = rng.choice([2, 3, 4, 7, 1000])
    keys = {}
    for i in range(6):
        algorithm = ["tokenbucket", "leakybucket", "concurrency"][i] if i < 3 else rng.choice(list(PARAMETERS))
        size, parameter = rng.choice(PARAMETERS[algorithm] + [(40, "20"), (10, "0.000003"), (7, "999.999999")] * (algorithm in ("tokenbucket", "leakybucket")))
        keys[f"{{k}}:{i}"] = (algorithm, size, parameter)
    now_us = int(time.time()) * 1_000_000 + rng.randrange(1_000_000)
    for step in range(600):
        now_us += rng.choice([0, 1, rng.randrange(1000), rng.randrange(300_000), rng.randrange(3_000_000)])
        chosen = rng.sample(sorted(keys), rng.randint(1, 3))
        specs, whole = [], []
        for key in chosen:
            algorithm, size, parameter = keys[key]
            n = rng.choice([0, 1, 1, 2, size // instances, size // instances + 1])
            specs.append((algorithm, *divided(algorithm, size, parameter, instances), n))
            whole.append((algorithm, *share(algorithm, size, parameter, instances), n))
        args: list[object] = ["RL.MULTI", len(chosen), *chosen, f"{now_us // 1_000_000}.{now_us % 1_000_000:06d}"]
        for algorithm, size, parameter, n in specs:
            args += [algorithm.upper(), size, parameter, n]
        assert whole == specs, (seed, step)
        assert local.multi(chosen, now_us, whole) == persisted(r, chosen, args), (seed, step, args)
    r.close()


def test_a_bucket_of_40_at_20_a_second_among_4_instances_is_10_at_once_and_5_a_second(own_server: Server) -> None:
    """docs/clients.md's example, through the limiter with Redis stopped:
    the bucket in process holds 10 and refills 5 a second (the rate divided
    too: 20 a second, undivided, would refill one every 50 ms)."""
    limiter = RateLimiter(redis.Redis(port=own_server.port), Limit("tokenbucket", 40, rate=20), key=lambda request: "k", on_unavailable="local", instances=4)
    own_server.stop()
    try:
        decisions: list[Decision] = []
        while not decisions or decisions[-1].allowed:
            decision = limiter.check()
            assert decision is not None and decision.local
            decisions.append(decision)
        denied = decisions[-1]
        assert len(decisions) == 11 and [d.limits[0].remaining for d in decisions[:10]] == list(range(9, -1, -1))
        assert 150 < denied.retry_after_ms <= 200  # the next token: 1/5 s after the bucket emptied
        assert rate_limit_headers(denied)["RateLimit-Policy"] == '"default";q=10;w=2'  # 10 refill in 2 s
        started = time.monotonic()
        time.sleep(1.0)
        admitted = 0
        while (decision := limiter.check()) is not None and decision.allowed:
            admitted += 1
        elapsed = time.monotonic() - started
        assert int(5 * (elapsed - 0.2)) <= admitted <= int(5 * elapsed) + 1, (admitted, elapsed)
    finally:
        own_server.start()
