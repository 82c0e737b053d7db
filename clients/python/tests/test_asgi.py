"""The ASGI middleware under Starlette and Litestar, and the FastAPI
dependency, served by uvicorn over real HTTP."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, AsyncIterator

import redis
import redis.asyncio
from fastapi import Depends, FastAPI
from fastapi.responses import PlainTextResponse
from litestar import Litestar
from litestar import get as litestar_get
from litestar.middleware import DefineMiddleware
from litestar.response import Response as LitestarResponse
from starlette.applications import Starlette
from starlette.authentication import SimpleUser, UnauthenticatedUser
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from redis_ratelimit_client import AsyncRateLimiter, Decision, Limit, by_ip, by_user
from redis_ratelimit_client.asgi import RateLimitMiddleware
from redis_ratelimit_client.fastapi import RateLimit, RateLimitExceeded, RateLimitHeadersMiddleware, rate_limit_exceeded_handler
from servers import Server
from modes import run
from web import (
    ABORT_SLOTS,
    HEADER_CHOICES,
    HEADERS_LIMIT,
    SLOTS,
    WORK,
    Running,
    check_aborting_clients,
    check_concurrency_scenario,
    check_headers_scenario,
    check_scenario,
    check_streamed_slot,
    get,
    rate_headers,
    serve_asgi,
    wait_for,
)

LIMIT = Limit("tokenbucket", 2, rate=0.001)


def skip_free(scope: Any) -> bool:
    return bool(scope["path"] == "/free")


def limiter(server: Server, fail_open: bool) -> AsyncRateLimiter:
    return AsyncRateLimiter(redis.asyncio.Redis(port=server.port), LIMIT, key=by_ip(trusted_proxies=1), fail_open=fail_open)


def starlette_app(server: Server, fail_open: bool) -> Starlette:
    async def ok(request: Request) -> Response:
        assert isinstance(request.state.rate_limit, Decision) or request.url.path == "/free" or fail_open
        return Response("ok", media_type="text/plain")

    async def fail(request: Request) -> Response:
        return Response("bad", status_code=400, media_type="text/plain")

    app = Starlette(routes=[Route("/ok", ok), Route("/fail", fail), Route("/free", ok)])
    app.add_middleware(RateLimitMiddleware, limiter=limiter(server, fail_open), skip=skip_free, skip_failed_requests=True)
    return app


def test_starlette_middleware(own_server: Server) -> None:
    with serve_asgi(starlette_app(own_server, True)) as open_port, serve_asgi(starlette_app(own_server, False)) as closed_port:
        check_scenario(open_port, closed_port, own_server)


def litestar_app(server: Server, fail_open: bool) -> Litestar:
    @litestar_get("/ok", media_type="text/plain")
    async def ok() -> str:
        return "ok"

    @litestar_get("/free", media_type="text/plain")
    async def free() -> str:
        return "ok"

    @litestar_get("/fail", media_type="text/plain")
    async def fail() -> LitestarResponse[str]:
        return LitestarResponse("bad", status_code=400, media_type="text/plain")

    middleware = DefineMiddleware(RateLimitMiddleware, limiter=limiter(server, fail_open), skip=skip_free, skip_failed_requests=True)
    return Litestar(route_handlers=[ok, free, fail], middleware=[middleware])


def test_litestar_middleware(own_server: Server) -> None:
    with serve_asgi(litestar_app(own_server, True)) as open_port, serve_asgi(litestar_app(own_server, False)) as closed_port:
        check_scenario(open_port, closed_port, own_server)


def fastapi_app(server: Server, fail_open: bool) -> FastAPI:
    """Per-route dependency for /ok and /free-less routes; refunds of failed
    requests come from the middleware, so /fail is limited by the middleware."""
    app = FastAPI()
    app.add_middleware(RateLimitHeadersMiddleware)
    app.add_exception_handler(RateLimitExceeded, rate_limit_exceeded_handler)
    limit = RateLimit(limiter(server, fail_open))

    @app.get("/ok", response_class=PlainTextResponse)
    async def ok(decision: Decision | None = Depends(limit)) -> str:
        assert decision is not None or fail_open
        return "ok"

    @app.get("/free", response_class=PlainTextResponse)
    async def free() -> str:
        return "ok"

    failing = FastAPI()

    @failing.get("/", response_class=PlainTextResponse, status_code=400)
    async def fail() -> str:
        return "bad"

    failing.add_middleware(RateLimitMiddleware, limiter=limiter(server, fail_open), skip_failed_requests=True)
    app.mount("/fail", failing)
    return app


def test_fastapi_dependency(own_server: Server) -> None:
    with serve_asgi(fastapi_app(own_server, True)) as open_port, serve_asgi(fastapi_app(own_server, False)) as closed_port:
        # FastAPI redirects /fail to /fail/: follow it by asking for /fail/ in the scenario.
        status, _, _ = get(open_port, "/fail/", "198.51.100.1")
        assert status == 400
        check_scenario(open_port, closed_port, own_server, fail_path="/fail/")


def signed_in(app: Any) -> Any:
    """A stand-in auth middleware: `Authorization: <name>` signs in as <name>."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        name = dict(scope.get("headers", [])).get(b"authorization")
        scope["user"] = SimpleUser(name.decode()) if name else UnauthenticatedUser()
        await app(scope, receive, send)

    return wrapped


def test_throttle_by_user_and_refunds_of_successes(own_server: Server) -> None:
    async def ok(request: Request) -> Response:
        return Response("ok", media_type="text/plain")

    async def fail(request: Request) -> Response:
        return Response("bad", status_code=400, media_type="text/plain")

    paced = Starlette(routes=[Route("/", ok)])
    paced.add_middleware(
        RateLimitMiddleware,
        limiter=AsyncRateLimiter(redis.asyncio.Redis(port=own_server.port), Limit("leakybucket", 3, rate=5), key=by_user()),
        throttle=True,
    )
    quiet = Starlette(routes=[Route("/ok", ok), Route("/fail", fail)])
    quiet.add_middleware(
        RateLimitMiddleware,
        limiter=AsyncRateLimiter(redis.asyncio.Redis(port=own_server.port), Limit("tokenbucket", 1, rate=0.001), key=by_ip(trusted_proxies=1)),
        skip_successful_requests=True, headers=False, message="Slow down.",
    )
    with serve_asgi(signed_in(paced)) as paced_port, serve_asgi(quiet) as quiet_port:
        # A first request opens the connection and asks the mode: not timed.
        assert get(paced_port, "/", "203.0.113.1", {"Authorization": "carol"})[0] == 200
        times = []
        for user in ("alice", "alice", "bob"):
            started = time.monotonic()
            status, headers, _ = get(paced_port, "/", "203.0.113.1", {"Authorization": user})
            times.append(time.monotonic() - started)
            assert (status, headers["ratelimit-policy"]) == (200, '"default";q=3;w=1')
        # alice's second request waited its place in the queue (1/rate = 200 ms after her first was admitted); bob's did not.
        assert times[0] + times[1] >= 0.19 and times[0] < 0.15 and times[2] < 0.15, times
        with redis.Redis(port=own_server.port) as r:
            keys = set(r.keys())  # carol's one unit may have drained already (200 ms)
            both = {b"ratelimit:{user:alice}:leakybucket:3:5", b"ratelimit:{user:bob}:leakybucket:3:5"}
            assert both <= keys <= both | {b"ratelimit:{user:carol}:leakybucket:3:5"}, keys

        for _ in range(3):  # successes give their unit back
            status, headers, body = get(quiet_port, "/ok", "203.0.113.5")
            assert (status, body, rate_headers(headers)) == (200, "ok", {})
        assert get(quiet_port, "/fail", "203.0.113.5")[0] == 400
        status, headers, body = get(quiet_port, "/fail", "203.0.113.5")
        assert (status, rate_headers(headers)) == (429, {"retry-after": "1000"})  # headers=False: no IETF fields
        assert body == {"error": "rate_limit_exceeded", "message": "Slow down.", "retry_after_seconds": 1000}


def concurrency_limiter(server: Server) -> AsyncRateLimiter:
    return AsyncRateLimiter(redis.asyncio.Redis(port=server.port), SLOTS, key=by_ip(trusted_proxies=1))


async def wait_for_gate(gate: threading.Event) -> None:
    while not gate.is_set():
        await asyncio.sleep(0.01)


def test_starlette_concurrency_limit(server: Server, r: redis.Redis, mode: str) -> None:
    gate = threading.Event()

    async def ok(request: Request) -> Response:
        return Response("ok", media_type="text/plain")

    async def slow(request: Request) -> Response:
        await wait_for_gate(gate)
        return Response("slow", media_type="text/plain")

    async def boom(request: Request) -> Response:
        raise RuntimeError("the handler failed")

    app = Starlette(routes=[Route("/ok", ok), Route("/slow", slow), Route("/boom", boom)])
    app.add_middleware(RateLimitMiddleware, limiter=concurrency_limiter(server))
    with serve_asgi(app) as port:
        check_concurrency_scenario(port, r, mode, gate)


def test_litestar_concurrency_limit(server: Server, r: redis.Redis, mode: str) -> None:
    gate = threading.Event()

    @litestar_get("/ok", media_type="text/plain")
    async def ok() -> str:
        return "ok"

    @litestar_get("/slow", media_type="text/plain")
    async def slow() -> str:
        await wait_for_gate(gate)
        return "slow"

    @litestar_get("/boom", media_type="text/plain")
    async def boom() -> str:
        raise RuntimeError("the handler failed")

    app = Litestar(route_handlers=[ok, slow, boom], middleware=[DefineMiddleware(RateLimitMiddleware, limiter=concurrency_limiter(server))])
    with serve_asgi(app) as port:
        check_concurrency_scenario(port, r, mode, gate)


def test_fastapi_concurrency_limit(server: Server, r: redis.Redis, mode: str) -> None:
    gate = threading.Event()
    app = FastAPI()
    app.add_middleware(RateLimitHeadersMiddleware)
    app.add_exception_handler(RateLimitExceeded, rate_limit_exceeded_handler)
    limited = [Depends(RateLimit(concurrency_limiter(server)))]

    @app.get("/ok", response_class=PlainTextResponse, dependencies=limited)
    async def ok() -> str:
        return "ok"

    @app.get("/slow", response_class=PlainTextResponse, dependencies=limited)
    async def slow() -> str:
        await wait_for_gate(gate)
        return "slow"

    @app.get("/boom", response_class=PlainTextResponse, dependencies=limited)
    async def boom() -> str:
        raise RuntimeError("the handler failed")

    with serve_asgi(app) as port:
        check_concurrency_scenario(port, r, mode, gate)


def test_asgi_streamed_response_holds_its_slot_until_sent(server: Server, r: redis.Redis, mode: str) -> None:
    gate = threading.Event()

    async def chunks() -> AsyncIterator[str]:
        yield "first "
        await wait_for_gate(gate)
        yield "last"

    async def stream(request: Request) -> StreamingResponse:
        return StreamingResponse(chunks(), media_type="text/plain")

    app = Starlette(routes=[Route("/stream", stream)])
    app.add_middleware(RateLimitMiddleware, limiter=concurrency_limiter(server))
    with serve_asgi(app) as port:
        check_streamed_slot(port, r, mode, gate)


def test_each_headers_choice_in_starlette_and_litestar(module_server: Server) -> None:
    with module_server.client() as admin:
        admin.flushall()
    for i, choice in enumerate(HEADER_CHOICES):
        def limiter() -> AsyncRateLimiter:  # one per app: each app runs in an event loop of its own
            return AsyncRateLimiter(redis.asyncio.Redis(port=module_server.port), HEADERS_LIMIT, key=by_ip(trusted_proxies=1))

        async def ok(request: Request) -> Response:
            return Response("ok", media_type="text/plain")

        starlette = Starlette(routes=[Route("/ok", ok)])
        starlette.add_middleware(RateLimitMiddleware, limiter=limiter(), headers=choice)

        @litestar_get("/ok", media_type="text/plain")
        async def litestar_ok() -> str:
            return "ok"

        litestar = Litestar(route_handlers=[litestar_ok], middleware=[DefineMiddleware(RateLimitMiddleware, limiter=limiter(), headers=choice)])
        with serve_asgi(starlette) as starlette_port, serve_asgi(litestar) as litestar_port:
            check_headers_scenario(starlette_port, choice, f"198.51.100.{i}")
            check_headers_scenario(litestar_port, choice, f"198.51.100.{100 + i}")


def test_each_headers_choice_in_fastapi(module_server: Server) -> None:
    with module_server.client() as admin:
        admin.flushall()
    for i, choice in enumerate(HEADER_CHOICES):
        app = FastAPI()
        app.add_middleware(RateLimitHeadersMiddleware)
        app.add_exception_handler(RateLimitExceeded, rate_limit_exceeded_handler)
        limited = [Depends(RateLimit(AsyncRateLimiter(redis.asyncio.Redis(port=module_server.port), HEADERS_LIMIT, key=by_ip(trusted_proxies=1)), headers=choice))]

        @app.get("/ok", response_class=PlainTextResponse, dependencies=limited)
        async def ok() -> str:
            return "ok"

        with serve_asgi(app) as port:
            check_headers_scenario(port, choice, f"198.51.100.{200 + i}")


def aborting_limiter(server: Server) -> AsyncRateLimiter:
    return AsyncRateLimiter(redis.asyncio.Redis(port=server.port), ABORT_SLOTS, key=by_ip(trusted_proxies=1))


def slots_free(r: redis.Redis, mode: str) -> int:
    return int(run(r, mode, "RL.PEEK", "ratelimit:{ip:203.0.113.99}:slots", "CONCURRENCY", "3", "30", "*", "0")[1])


def test_clients_that_abort_never_free_a_slot_while_its_handler_runs(server: Server, r: redis.Redis, mode: str) -> None:
    """Starlette and Litestar (the ASGI middleware), FastAPI (the
    dependency, an async route and a sync one, which runs in a thread)."""
    running = Running()

    async def work(request: Request) -> Response:
        with running:
            await asyncio.sleep(WORK)
        return Response("done", media_type="text/plain")

    starlette = Starlette(routes=[Route("/work", work)])
    starlette.add_middleware(RateLimitMiddleware, limiter=aborting_limiter(server))

    @litestar_get("/work", media_type="text/plain")
    async def litestar_work() -> str:
        with running:
            await asyncio.sleep(WORK)
        return "done"

    litestar = Litestar(route_handlers=[litestar_work], middleware=[DefineMiddleware(RateLimitMiddleware, limiter=aborting_limiter(server))])

    fastapi = FastAPI()
    fastapi.add_middleware(RateLimitHeadersMiddleware)
    fastapi.add_exception_handler(RateLimitExceeded, rate_limit_exceeded_handler)
    limited = [Depends(RateLimit(aborting_limiter(server)))]

    @fastapi.get("/work", response_class=PlainTextResponse, dependencies=limited)
    async def fastapi_work() -> str:
        with running:
            await asyncio.sleep(WORK)
        return "done"

    @fastapi.get("/work-sync", response_class=PlainTextResponse, dependencies=limited)
    def fastapi_work_sync() -> str:
        with running:
            time.sleep(WORK)
        return "done"

    for app, path in ((starlette, "/work"), (litestar, "/work"), (fastapi, "/work"), (fastapi, "/work-sync")):
        running.__init__()  # type: ignore[misc]
        with serve_asgi(app) as port:
            check_aborting_clients(port, running, path)
            wait_for(lambda: slots_free(r, mode) == 3)
