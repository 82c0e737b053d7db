"""The ASGI middleware under Starlette and Litestar, and the FastAPI
dependency, served by uvicorn over real HTTP."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
import redis.asyncio
from fastapi import Depends, FastAPI
from fastapi.responses import PlainTextResponse
from litestar import Litestar
from litestar import get as litestar_get
from litestar.middleware import DefineMiddleware
from litestar.response import Response as LitestarResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from redis_ratelimit_client import AsyncRateLimiter, Decision, Limit, by_ip
from redis_ratelimit_client.asgi import RateLimitMiddleware
from redis_ratelimit_client.fastapi import RateLimit, RateLimitExceeded, rate_limit_exceeded_handler
from servers import Server
from web import check_scenario, get, serve_asgi

LIMIT = Limit("tokenbucket", 2, rate=0.001)


def skip_free(scope: Any) -> bool:
    return bool(scope["path"] == "/free")


def limiter(server: Server, fail_open: bool) -> AsyncRateLimiter:
    return AsyncRateLimiter(redis.asyncio.Redis(port=server.port), LIMIT, key=by_ip(trusted_proxies=1), fail_open=fail_open)


@pytest.fixture
def own_server() -> Iterator[Server]:
    s = Server()
    yield s
    s.remove()


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
