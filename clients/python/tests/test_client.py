import pytest
import redis

from redis_ratelimit import Decision, check, command, denied_body, headers


def test_command_syntax():
    assert command("k", limit=10, rate=0.5) == ["RL.TOKENBUCKET", "k", "10", "0.5", "*", "1"]
    assert command("k", limit=5, algorithm="slidinglog", window=60, now=1700000000.25, cost=2) == [
        "RL.SLIDINGLOG", "k", "5", "60", "1700000000.25", "2"]
    with pytest.raises(ValueError, match="positive window"):
        command("k", limit=5, algorithm="fixedwindow")


def test_token_bucket_decisions_and_headers(client):
    first = check(client, "user:1", limit=3, rate=0.001)
    assert first == Decision(True, 2, 3, 0, 1_000_000, "default", 3000, None)
    assert headers(first) == {"RateLimit-Policy": '"default";q=3;w=3000', "RateLimit": '"default";r=2;t=1000'}
    check(client, "user:1", limit=3, rate=0.001, cost=2)
    denied = check(client, "user:1", limit=3, rate=0.001)
    assert (denied.allowed, denied.remaining) == (False, 0)
    assert headers(denied, legacy=True) == {
        "RateLimit-Policy": '"default";q=3;w=3000',
        "RateLimit": '"default";r=0;t=3000',
        "RateLimit-Limit": "3",
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": "3000",
        "Retry-After": "1000",
    }
    assert denied_body(denied) == {
        "error": "rate_limit_exceeded",
        "message": "Rate limit exceeded. Please try again later.",
        "retry_after_seconds": 1000,
    }
    assert 990_000 < client.pttl("ratelimit:user:1") <= 3_000_000


def test_exact_numbers_at_a_fixed_time(client):
    d = check(client, "w", limit=2, algorithm="fixedwindow", window=60, now=1700000050, policy="per-minute")
    assert headers(d) == {"RateLimit-Policy": '"per-minute";q=2;w=60', "RateLimit": '"per-minute";r=1;t=50'}
    lb = check(client, "q", limit=3, algorithm="leakybucket", rate=2, now=1000)
    lb2 = check(client, "q", limit=3, algorithm="leakybucket", rate=2, now=1000)
    assert (lb.delay_ms, lb2.delay_ms, lb2.remaining, lb2.window_seconds) == (0, 500, 1, 2)


def test_every_algorithm_denies_past_its_limit(client):
    for algorithm in ("slidingwindow", "slidinglog", "fixedwindow"):
        assert check(client, algorithm, limit=2, algorithm=algorithm, window=60, now=1700000040, cost=2).allowed
        denied = check(client, algorithm, limit=2, algorithm=algorithm, window=60, now=1700000040)
        assert not denied.allowed and denied.retry_after_ms > 0 and "Retry-After" in headers(denied)


def test_never_passes_has_no_retry_after(client):
    d = check(client, "big", limit=2, rate=1, cost=3)
    assert d.retry_after_ms == -1
    assert "Retry-After" not in headers(d)
    assert denied_body(d)["retry_after_seconds"] is None


def test_module_errors_come_through(client):
    with pytest.raises(redis.ResponseError, match="capacity must be an integer"):
        check(client, "bad", limit=0, rate=1)
