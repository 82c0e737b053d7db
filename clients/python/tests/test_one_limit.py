"""A check of one limit sends that limit's own command (RL.TOKENBUCKET,
RL.ACQUIRE for a concurrency limit ...), cheaper for Redis than RL.MULTI
of one key; a check of several sends RL.MULTI. Read from the server's
SLOWLOG (every command logged), in module mode and in script mode (FCALL
of the library: the command's keys, its name, its other arguments)."""

from __future__ import annotations

from typing import Iterator

import pytest
import redis

from redis_ratelimit_client import Limit, RateLimiter
from redis_ratelimit_client.script import function_name

BURST = Limit("tokenbucket", 3, rate=0.001, name="burst")
SLOTS = Limit("concurrency", 2, lease=30, name="slots")
DAILY = Limit("fixedwindow", 5, window=86400, name="daily")


@pytest.fixture
def sent(r: redis.Redis) -> Iterator[redis.Redis]:
    """`r`, its server logging every command in SLOWLOG while the test runs."""
    slower_than = str(r.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"])
    r.config_set("slowlog-log-slower-than", 0)
    try:
        yield r
    finally:
        r.config_set("slowlog-log-slower-than", slower_than)


def sent_since(r: redis.Redis) -> list[list[str]]:
    """The limiter's calls since the log was last emptied, oldest first;
    the log emptied."""
    out = []
    for entry in reversed(r.slowlog_get(128)):
        command = entry["command"]  # bytes, even under decode_responses
        argv = (command.decode() if isinstance(command, bytes) else command).split(" ")
        if argv[0].upper().startswith("RL.") or argv[:2] == ["FCALL", function_name()]:
            out.append(argv)
    r.slowlog_reset()
    return out


def as_sent(mode: str, command: str, keys: list[str], *rest: str) -> list[str]:
    """A module call as the limiter sends it: the command (module mode), or
    FCALL of the library, its keys first, then the command's name and the
    rest (script mode)."""
    if mode == "script":
        return ["FCALL", function_name(), str(len(keys)), *keys, command, *rest]
    return [command, *([str(len(keys))] if command == "RL.MULTI" else []), *keys, *rest]


def test_one_limit_sends_its_own_command(sent: redis.Redis, mode: str) -> None:
    limiter = RateLimiter(sent, [BURST], key=lambda request: "alice")
    assert limiter.check() is not None  # auto mode asks the server what it has: not counted
    sent.slowlog_reset()
    decisions = [limiter.check() for _ in range(3)]
    assert sent_since(sent) == [as_sent(mode, "RL.TOKENBUCKET", ["ratelimit:{alice}:burst"], "3", "0.001", "*", "1")] * 3
    assert [(d.allowed, d.limits[0].remaining) for d in decisions if d] == [(True, 1), (True, 0), (False, 0)]
    # Denied: the bucket's own wait for one unit (about 1000 s), as RL.MULTI of it answers.
    assert 998_000 < decisions[2].retry_after_ms <= 1_000_000  # type: ignore[union-attr]


def test_a_concurrency_limit_alone_sends_rl_acquire_and_its_lease_is_released(sent: redis.Redis, mode: str) -> None:
    limiter = RateLimiter(sent, [SLOTS], key=lambda request: "k")
    assert limiter.check() is not None
    sent.slowlog_reset()
    decision = limiter.check()
    assert decision is not None and decision.allowed
    assert [(x.remaining, x.lease_id) for x in decision.limits] == [(0, 2)]
    limiter.release(decision)
    assert sent_since(sent) == [
        as_sent(mode, "RL.ACQUIRE", ["ratelimit:{k}:slots"], "2", "30", "*", "1"),
        as_sent(mode, "RL.RELEASE", ["ratelimit:{k}:slots"], "2", "*"),
    ]
    again = limiter.check()  # the slot released is free again; the first lease still holds the other
    assert again is not None and [(x.allowed, x.remaining, x.lease_id) for x in again.limits] == [(True, 0, 3)]


def test_two_limits_send_rl_multi(sent: redis.Redis, mode: str) -> None:
    limiter = RateLimiter(sent, [BURST, DAILY], key=lambda request: "bob")
    assert limiter.check() is not None
    sent.slowlog_reset()
    decision = limiter.check()
    assert decision is not None and [x.remaining for x in decision.limits] == [1, 3]
    assert sent_since(sent) == [
        as_sent(mode, "RL.MULTI", ["ratelimit:{bob}:burst", "ratelimit:{bob}:daily"], "*", "TOKENBUCKET", "3", "0.001", "1", "FIXEDWINDOW", "5", "86400", "1"),
    ]
