"""Keys by address (IPv6 by /56, proxies only when configured) and by user;
no address is an error, never one key for all."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import redis

from redis_ratelimit_client import Limit, RateLimiter, by_ip, by_user, ip_key


def test_ip_keys() -> None:
    assert ip_key("203.0.113.7") == "ip:203.0.113.7"
    assert ip_key("::ffff:203.0.113.7") == "ip:203.0.113.7"
    assert ip_key("2001:db8:0:12ab::1") == "ip6:2001:db8:0:1200::/56"
    assert ip_key("2001:db8:0:12ab::1", 64) == "ip6:2001:db8:0:12ab::/64"
    assert ip_key("2001:db8:0:12ab::1", False) == "ip6:2001:db8:0:12ab::1"
    assert ip_key("not an address") == "ip:not an address"


def scope(client: str, forwarded: str | None = None, user: object = None) -> dict[str, object]:
    headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded else []
    return {"type": "http", "client": (client, 5000), "headers": headers, "user": user}


def test_by_ip_trusts_forwarded_for_only_when_told() -> None:
    request = scope("10.0.0.1", "198.51.100.9, 203.0.113.7")
    assert by_ip()(request) == "ip:10.0.0.1"
    assert by_ip(trusted_proxies=1)(request) == "ip:203.0.113.7"
    assert by_ip(trusted_proxies=2)(request) == "ip:198.51.100.9"
    assert by_ip(trusted_proxies=3)(request) == "ip:10.0.0.1"  # fewer hops than proxies: the peer


def test_by_ip_reads_each_framework() -> None:
    django_like = SimpleNamespace(META={"REMOTE_ADDR": "203.0.113.8", "HTTP_X_FORWARDED_FOR": "198.51.100.1"})
    flask_like = SimpleNamespace(remote_addr="203.0.113.9", headers={})
    starlette_like = SimpleNamespace(client=SimpleNamespace(host="2001:db8::1"), headers={})
    assert by_ip()(django_like) == "ip:203.0.113.8"
    assert by_ip(trusted_proxies=1)(django_like) == "ip:198.51.100.1"
    assert by_ip()(flask_like) == "ip:203.0.113.9"
    assert by_ip()(starlette_like) == "ip6:2001:db8::/56"


def test_by_user_falls_back_to_the_address() -> None:
    signed_in = SimpleNamespace(is_authenticated=True, pk=42)
    anonymous = SimpleNamespace(is_authenticated=False, pk=None)
    assert by_user()(scope("203.0.113.7", user=signed_in)) == "user:42"
    assert by_user()(scope("203.0.113.7", user=anonymous)) == "ip:203.0.113.7"
    assert by_user()(SimpleNamespace(META={"REMOTE_ADDR": "203.0.113.8"}, user=signed_in)) == "user:42"
    assert by_user(lambda request: "alice")(scope("203.0.113.7")) == "user:alice"
    assert by_user(lambda request: None)(scope("203.0.113.7")) == "ip:203.0.113.7"


def test_no_address_is_refused_never_one_shared_key(r: redis.Redis) -> None:
    no_request = r"^by_ip: no request to key by \(check\(\) was called without one\): pass the request, or give the limiter a key function$"
    no_address = r"^by_ip: the request carries no client address: give the limiter a key function that names the caller$"
    unix_socket: dict[str, Any] = {"type": "http", "client": None, "headers": []}
    with pytest.raises(ValueError, match=no_request):
        by_ip()(None)
    with pytest.raises(ValueError, match=no_request):
        by_user()(None)
    with pytest.raises(ValueError, match=no_address):
        by_ip()(unix_socket)
    with pytest.raises(ValueError, match=no_address):
        by_ip()(SimpleNamespace(META={"REMOTE_ADDR": ""}))
    with pytest.raises(ValueError, match=no_address):
        by_ip()(SimpleNamespace(client=None, headers={}))
    # A trusted proxy's X-Forwarded-For is an address.
    assert by_ip(trusted_proxies=1)({**unix_socket, "headers": [(b"x-forwarded-for", b"203.0.113.7")]}) == "ip:203.0.113.7"

    limiter = RateLimiter(r, Limit("tokenbucket", 3, rate=1))
    with pytest.raises(ValueError, match=no_request):
        limiter.check()
    with pytest.raises(ValueError, match=no_address):
        limiter.check(unix_socket)
    assert r.keys() == []  # nothing taken
    decision = RateLimiter(r, Limit("tokenbucket", 3, rate=1), key=lambda request: "jobs").check()
    assert decision is not None and decision.limits[0].key == "ratelimit:{jobs}:tokenbucket:3:1"
