"""The README's Starlette and FastAPI examples, each run as it stands (its
own imports and limiter, REDIS_URL naming the test's redis-server) and
served over real HTTP."""

from __future__ import annotations

import http.client
import json
import re
from pathlib import Path
from typing import Any

import pytest
import redis

from servers import Server
from web import get, rate_headers, serve_asgi
from windows import wait_for_window_with

README = Path(__file__).resolve().parents[1] / "README.md"


def example(first_import: str) -> str:
    """The one ```python block of the README that has this import line."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    found = [block for block in blocks if first_import + "\n" in block]
    assert len(found) == 1, f"{len(found)} README examples with {first_import!r}"
    return str(found[0])


def app_of(source: str, server: Server, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{server.port}")
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(source, str(README), "exec"), namespace)
    return namespace["app"]


def post(port: int, path: str) -> tuple[int, dict[str, str], str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", path)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
    finally:
        connection.close()


def test_the_starlette_example(server: Server, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_of(example("from starlette.applications import Starlette"), server, monkeypatch)
    with serve_asgi(app) as port:
        for remaining in (99, 98):
            status, headers, body = get(port, "/api/search", "203.0.113.1")
            assert (status, body, headers["ratelimit-policy"]) == (200, {"remaining": remaining}, '"default";q=100;w=60')
        status, headers, body = get(port, "/api/missing", "203.0.113.1")  # 404: its unit given back
        assert status == 404 and headers["ratelimit"].startswith('"default";r=97;t=')
        status, headers, body = get(port, "/health", "203.0.113.1")  # not an /api/ route: not limited
        assert (status, body, rate_headers(headers)) == (200, {"ok": True}, {})
        status, _, body = get(port, "/api/search", "203.0.113.1")
        assert (status, body) == (200, {"remaining": 97})
    assert r.keys() == ["ratelimit:{ip:203.0.113.1}:slidingwindow:100:60"]


def test_the_fastapi_example(server: Server, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_of(example("from fastapi import Depends, FastAPI"), server, monkeypatch)
    wait_for_window_with(r, 60)  # the login limit is a fixed window of 60 s
    with serve_asgi(app) as port:
        status, headers, body = get(port, "/search", "203.0.113.1")
        assert (status, body, rate_headers(headers)) == (200, {"remaining": 9}, {"ratelimit-policy": '"default";q=10;w=10', "ratelimit": '"default";r=9;t=1'})
        for remaining in range(4, -1, -1):  # a route that returns a Response has the headers too
            status, headers, text = post(port, "/login")
            assert (status, text, headers["ratelimit-policy"]) == (200, "welcome", '"default";q=5;w=60')
            assert headers["ratelimit"].startswith(f'"default";r={remaining};t=')
        status, headers, text = post(port, "/login")
        assert status == 429 and json.loads(text)["error"] == "rate_limit_exceeded" and "retry-after" in headers
        # The login limit took nothing from the search limit: each has its own key.
        status, headers, body = get(port, "/search", "203.0.113.1")
        assert (status, body) == (200, {"remaining": 8})
        status, headers, body = get(port, "/health", "203.0.113.1")
        assert (status, body, rate_headers(headers)) == (200, {"ok": True}, {})
    assert sorted(r.keys()) == ["ratelimit:{ip:127.0.0.1}:fixedwindow:5:60", "ratelimit:{ip:203.0.113.1}:tokenbucket:10:1"]
