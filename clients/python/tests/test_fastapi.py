"""The FastAPI dependency's RateLimit headers go on every response it let
through, whatever the route returns: a value FastAPI serializes, or a
Response of the route's own (whose headers FastAPI does not merge)."""

from __future__ import annotations

import redis
import redis.asyncio
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.requests import Request

from redis_ratelimit_client import AsyncRateLimiter, ConfigurationError, Limit, by_ip
from redis_ratelimit_client.fastapi import RateLimit, RateLimitExceeded, RateLimitHeadersMiddleware, rate_limit_exceeded_handler
from servers import Server
from web import get, rate_headers, serve_asgi

POLICY = '"default";q=3;w=3000'


def app_with_routes(server: Server, headers_middleware: bool) -> FastAPI:
    app = FastAPI()
    if headers_middleware:
        app.add_middleware(RateLimitHeadersMiddleware)
    app.add_exception_handler(RateLimitExceeded, rate_limit_exceeded_handler)

    async def configuration_error(request: Request, error: Exception) -> JSONResponse:
        return JSONResponse({"error": str(error)}, status_code=500)

    app.add_exception_handler(ConfigurationError, configuration_error)
    limiter = AsyncRateLimiter(redis.asyncio.Redis(port=server.port), Limit("tokenbucket", 3, rate=0.001), key=by_ip(trusted_proxies=1))
    limited = [Depends(RateLimit(limiter))]

    @app.get("/value", response_class=PlainTextResponse, dependencies=limited)
    async def value() -> str:
        return "ok"

    @app.get("/response", dependencies=limited)
    async def response() -> PlainTextResponse:
        return PlainTextResponse("ok", headers={"X-Own": "kept"})

    @app.get("/json", dependencies=limited)
    async def json() -> JSONResponse:
        return JSONResponse({"ok": True})

    @app.get("/missing", dependencies=limited)
    async def missing() -> str:
        raise HTTPException(404, "no such thing")

    return app


def test_headers_whatever_the_route_returns(server: Server, r: redis.Redis) -> None:
    with serve_asgi(app_with_routes(server, headers_middleware=True)) as port:
        status, headers, body = get(port, "/value", "203.0.113.1")
        assert (status, body, rate_headers(headers)) == (200, "ok", {"ratelimit-policy": POLICY, "ratelimit": '"default";r=2;t=1000'})
        status, headers, body = get(port, "/response", "203.0.113.1")
        assert (status, body, headers["x-own"]) == (200, "ok", "kept")
        assert rate_headers(headers) == {"ratelimit-policy": POLICY, "ratelimit": '"default";r=1;t=1000'}
        status, headers, body = get(port, "/json", "203.0.113.1")
        assert (status, body, rate_headers(headers)) == (200, {"ok": True}, {"ratelimit-policy": POLICY, "ratelimit": '"default";r=0;t=1000'})
        status, headers, body = get(port, "/json", "203.0.113.1")  # denied: the handler's answer, its headers once
        assert (status, rate_headers(headers)) == (429, {"ratelimit-policy": POLICY, "ratelimit": '"default";r=0;t=1000', "retry-after": "1000"})
        # A route that fails after the limiter let it through: the headers too.
        status, headers, body = get(port, "/missing", "203.0.113.2")
        assert (status, body, rate_headers(headers)) == (404, {"detail": "no such thing"}, {"ratelimit-policy": POLICY, "ratelimit": '"default";r=2;t=1000'})


def test_without_the_headers_middleware_the_dependency_refuses(server: Server, r: redis.Redis) -> None:
    with serve_asgi(app_with_routes(server, headers_middleware=False)) as port:
        for path in ("/value", "/response"):
            status, _, body = get(port, path, "203.0.113.1")
            assert (status, body) == (500, {
                "error": "RateLimit: the app needs RateLimitHeadersMiddleware to send the RateLimit headers"
                " (app.add_middleware(RateLimitHeadersMiddleware))"
            })
    assert r.keys() == []  # refused before taking anything
