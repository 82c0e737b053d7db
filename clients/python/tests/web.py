"""Real HTTP for the framework tests: uvicorn for ASGI apps, Werkzeug's
server for WSGI apps, each in a thread on a free port; requests with
http.client. And the scenarios every framework must pass the same way."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import http.client
import json
import math
import socket
import threading
import time
from typing import Any, Callable, Iterator

import redis
import uvicorn
from redis.asyncio.connection import AbstractConnection
from werkzeug.serving import make_server

from modes import run
from redis_ratelimit_client import Limit, RateLimiter
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


async def close_redis_connections() -> None:
    """Closes the asyncio Redis connections of the running loop, as an app
    closes its clients when it shuts down (they would warn when collected)."""
    loop = asyncio.get_running_loop()
    for connection in gc.get_objects():
        # type(), not isinstance: that reads __class__, which Django's lazy objects would resolve
        if issubclass(type(connection), AbstractConnection) and getattr(connection._writer, "_loop", None) is loop:
            await connection.disconnect()


@contextlib.contextmanager
def serve_asgi(app: Any) -> Iterator[int]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))

    async def serve() -> None:
        await server.serve()
        await close_redis_connections()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
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


# The concurrency scenario: at most 2 requests in flight per client address
# (one trusted proxy), leases of 30 s. `/ok` answers at once, `/slow` when
# the scenario sets the gate, `/boom` raises in the handler.
SLOTS = Limit("concurrency", 2, lease=30, name="slots")
SLOTS_POLICY = '"slots";q=2;qu="concurrent-requests"'
SLOTS_DENIED_BODY = {**DENIED_BODY, "retry_after_seconds": 1}


def wait_for(condition: Callable[[], bool], seconds: float = 5) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s")
        time.sleep(0.02)


def check_concurrency_scenario(port: int, r: redis.Redis, mode: str, gate: threading.Event, boom_status: int = 500) -> None:
    """What each framework's layer must do with a concurrency limit, over
    real HTTP, the gate cleared: every request holds a slot while its
    handler runs and gives it back when its response is done, when the
    handler raises, or when the client went away; a slot whose holder died
    comes back when its lease runs out."""

    def free(ip: str) -> int:  # slots free now, as RL.PEEK (takes nothing) says
        return int(run(r, mode, "RL.PEEK", f"ratelimit:{{ip:{ip}}}:slots", "CONCURRENCY", "2", "30", "*", "0")[1])

    # One after another: each response gives its slot back before the client sees it.
    for _ in range(3):
        status, headers, body = get(port, "/ok", "203.0.113.11")
        assert (status, body, rate_headers(headers)) == (200, "ok", {"ratelimit-policy": SLOTS_POLICY, "ratelimit": '"slots";r=1;t=30'})
    assert free("203.0.113.11") == 2

    # Two slow requests hold both slots: the third is denied, told to retry after the limit's hint (1 s), not the lease's 30 s.
    slow: list[Response] = []
    threads = [threading.Thread(target=lambda: slow.append(get(port, "/slow", "203.0.113.12"))) for _ in range(2)]
    for thread in threads:
        thread.start()
    wait_for(lambda: free("203.0.113.12") == 0)
    status, headers, body = get(port, "/ok", "203.0.113.12")
    assert (status, body) == (429, SLOTS_DENIED_BODY)
    assert rate_headers(headers) == {"ratelimit-policy": SLOTS_POLICY, "ratelimit": '"slots";r=0;t=1', "retry-after": "1"}
    status, _, _ = get(port, "/ok", "203.0.113.12")
    assert status == 429  # asked Redis again: a concurrency denial is never answered in process
    gate.set()
    for thread in threads:
        thread.join(10)
    gate.clear()
    assert sorted((s, b, h["ratelimit"]) for s, h, b in slow) == [(200, "slow", '"slots";r=0;t=30'), (200, "slow", '"slots";r=1;t=30')]
    assert free("203.0.113.12") == 2
    assert get(port, "/ok", "203.0.113.12")[0] == 200

    # A handler that raises gives its slot back.
    for _ in range(3):
        assert get(port, "/boom", "203.0.113.13")[0] == boom_status
    assert free("203.0.113.13") == 2

    # A client that goes away while its handler still works: the slot comes
    # back when the handler is done, long before the lease (30 s) runs out.
    with socket.create_connection(("127.0.0.1", port)) as aborted:
        aborted.sendall(b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 203.0.113.14\r\n\r\n")
        wait_for(lambda: free("203.0.113.14") == 1)
    time.sleep(0.2)
    assert free("203.0.113.14") == 1  # the handler still holds it
    gate.set()
    wait_for(lambda: free("203.0.113.14") == 2)
    gate.clear()

    # A holder that died without releasing (a limiter gone with its process):
    # its slots come back when its lease (0.5 s) runs out.
    crashed = RateLimiter(redis.Redis(port=r.connection_pool.connection_kwargs["port"]), Limit("concurrency", 2, lease=0.5, name="slots", cost=2), key=lambda request: "ip:203.0.113.15")
    taken = crashed.check()
    assert taken is not None and taken.allowed
    status, headers, body = get(port, "/ok", "203.0.113.15")
    assert (status, headers["retry-after"]) == (429, "1")
    wait_for(lambda: free("203.0.113.15") == 2, 1.5)
    assert get(port, "/ok", "203.0.113.15")[0] == 200


def check_streamed_slot(port: int, r: redis.Redis, mode: str, gate: threading.Event) -> None:
    """`/stream` sends a first chunk, then the last one when the gate is
    set: its slot is held until the last one is sent, or until the client
    that went away is noticed."""

    def free(ip: str) -> int:
        return int(run(r, mode, "RL.PEEK", f"ratelimit:{{ip:{ip}}}:slots", "CONCURRENCY", "2", "30", "*", "0")[1])

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/stream", headers={"X-Forwarded-For": "203.0.113.17"})
    response = connection.getresponse()
    assert response.read(6) == b"first "
    assert free("203.0.113.17") == 1
    gate.set()
    assert response.read() == b"last"
    connection.close()
    wait_for(lambda: free("203.0.113.17") == 2)


#: The `headers` choices, each served by every framework layer.
HEADER_CHOICES: list[Any] = [True, "draft-10", "draft-6", "legacy", False]
HEADERS_LIMIT = Limit("tokenbucket", 2, rate=0.001)  # t: 1000 s


def limit_fields(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.startswith(("ratelimit", "x-ratelimit")) or k == "retry-after"}


def check_headers_scenario(port: int, choice: Any, ip: str) -> None:
    """Two admitted requests and a denial from one client, a token bucket
    of 2 that refills one unit in 1000 s: exactly the fields of `choice`
    (docs/clients.md, Headers), Retry-After on the 429 whatever it is."""
    for expected_status, remaining in ((200, 1), (200, 0), (429, 0)):
        before = time.time()
        status, headers, _ = get(port, "/ok", ip)
        after = time.time()
        if choice in (True, "draft-10"):
            expected = {"ratelimit-policy": '"default";q=2;w=2000', "ratelimit": f'"default";r={remaining};t=1000'}
        elif choice == "draft-6":
            expected = {"ratelimit-limit": "2", "ratelimit-remaining": str(remaining), "ratelimit-reset": "1000"}
        elif choice == "legacy":
            reset = int(headers.get("x-ratelimit-reset", "0"))
            assert math.ceil(before) + 1000 <= reset <= math.ceil(after) + 1000, (reset, before, after, headers)  # the clock, rounded up, plus t
            expected = {"x-ratelimit-limit": "2", "x-ratelimit-remaining": str(remaining), "x-ratelimit-reset": str(reset)}
        else:
            expected = {}
        if expected_status == 429:
            expected["retry-after"] = "1000"
        assert (status, limit_fields(headers)) == (expected_status, expected), (choice, status, headers)


class Running:
    """How many handlers run at once: the most seen, and how many ran."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = self.ran = 0

    def __enter__(self) -> None:
        with self.lock:
            self.now += 1
            self.ran += 1
            self.most = max(self.most, self.now)

    def __exit__(self, *_: Any) -> None:
        with self.lock:
            self.now -= 1


#: The aborting-clients scenario: at most 3 requests in flight (one client
#: address), handlers that work 200 ms, clients that go away after 40 ms.
ABORT_SLOTS = Limit("concurrency", 3, lease=30, name="slots")
WORK = 0.2


def check_aborting_clients(port: int, running: Running, path: str = "/work") -> None:
    """30 clients, one every 20 ms, each sends its request and closes the
    connection 40 ms later, while the handler still works: the slot must
    stay held until the handler is done, so never more than 3 handlers run
    at once, and slots free as handlers end (more than 3 ran). The caller
    then finds every slot free (wait_for: each goes back just after its
    handler's response)."""

    def aborting() -> None:
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 203.0.113.99\r\n\r\n".encode())
            time.sleep(0.04)

    clients = []
    for _ in range(30):
        clients.append(threading.Thread(target=aborting))
        clients[-1].start()
        time.sleep(0.02)
    for thread in clients:
        thread.join(10)
    wait_for(lambda: running.now == 0, 10)
    assert running.most <= 3 < running.ran, (running.most, running.ran)  # never above the limit; slots reused
