"""Real HTTP for the framework tests: uvicorn for ASGI apps, Werkzeug's
server for WSGI apps, each in a thread on a free port; requests with
http.client. And the one scenario every framework must pass the same way."""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
from typing import Any, Iterator

import uvicorn
from werkzeug.serving import make_server

from servers import Server, free_port

Response = tuple[int, dict[str, str], Any]


def get(port: int, path: str, client_ip: str, headers: dict[str, str] | None = None) -> Response:
    """GET through a (pretend) proxy that says the client is `client_ip`."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers={"X-Forwarded-For": client_ip, **(headers or {})})
        response = connection.getresponse()
        raw = response.read()
        headers = {k.lower(): v for k, v in response.getheaders()}
        body = json.loads(raw) if headers.get("content-type", "").startswith("application/json") else raw.decode()
        return response.status, headers, body
    finally:
        connection.close()


def rate_headers(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k in ("ratelimit-policy", "ratelimit", "retry-after")}


@contextlib.contextmanager
def serve_asgi(app: Any) -> Iterator[int]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def serve_wsgi(app: Any) -> Iterator[int]:
    port = free_port()
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        server.shutdown()
        thread.join(10)


POLICY = '"default";q=2;w=2000'
DENIED_BODY = {
    "error": "rate_limit_exceeded",
    "message": "Rate limit exceeded. Please try again later.",
    "retry_after_seconds": 1000,
}


def check_scenario(open_port: int, closed_port: int, redis_server: Server, fail_path: str = "/fail") -> None:
    """What each framework's layer must do, over real HTTP. The apps limit
    by client address (one trusted proxy, so each step has its own client)
    with a token bucket of 2 refilled at 0.001/s: `/ok` answers 200, `/fail`
    400 (failed requests give their units back), `/free` is not limited.
    `open_port` fails open, `closed_port` fails closed."""
    for expected_r in ("1", "0"):
        status, headers, body = get(open_port, "/ok", "203.0.113.1")
        assert (status, body) == (200, "ok")
        assert rate_headers(headers) == {"ratelimit-policy": POLICY, "ratelimit": f'"default";r={expected_r};t=1000'}
    status, headers, body = get(open_port, "/ok", "203.0.113.1")
    assert status == 429
    assert rate_headers(headers) == {"ratelimit-policy": POLICY, "ratelimit": '"default";r=0;t=1000', "retry-after": "1000"}
    assert body == DENIED_BODY
    assert headers["content-type"].startswith("application/json")

    # Another client has its own quota.
    status, headers, _ = get(open_port, "/ok", "203.0.113.2")
    assert (status, headers["ratelimit"]) == (200, '"default";r=1;t=1000')

    # Failed requests give their units back: the quota never runs out.
    for _ in range(3):
        status, headers, body = get(open_port, fail_path, "203.0.113.3")
        assert (status, body, headers["ratelimit"]) == (400, "bad", '"default";r=1;t=1000')
    status, headers, _ = get(open_port, "/free", "203.0.113.1")
    assert (status, rate_headers(headers)) == (200, {})

    # Redis stopped: open lets requests through without headers, closed answers 503;
    # a client denied a moment ago is still denied, in process (denials.py).
    redis_server.stop()
    try:
        status, headers, body = get(open_port, "/ok", "203.0.113.1")
        assert (status, body, rate_headers(headers)) == (429, DENIED_BODY, {"ratelimit-policy": POLICY, "ratelimit": '"default";r=0;t=1000', "retry-after": "1000"})
        status, headers, body = get(open_port, "/ok", "203.0.113.5")
        assert (status, body, rate_headers(headers)) == (200, "ok", {})
        status, headers, body = get(closed_port, "/ok", "203.0.113.1")
        assert (status, body, rate_headers(headers)) == (503, {"error": "rate_limiter_unavailable"}, {})
    finally:
        redis_server.start()
    # Limiting resumes within a second or so of Redis coming back (a probe about once a second).
    back = time.monotonic()
    status, headers, _ = get(closed_port, "/ok", "203.0.113.4")
    while status == 503 and time.monotonic() - back < 2:
        time.sleep(0.05)
        status, headers, _ = get(closed_port, "/ok", "203.0.113.4")
    assert (status, headers["ratelimit"]) == (200, '"default";r=1;t=1000')
