"""ASGI middleware: Starlette, FastAPI, Litestar, or any ASGI app.

    app.add_middleware(RateLimitMiddleware, limiter=limiter)          # Starlette, FastAPI
    Litestar(..., middleware=[DefineMiddleware(RateLimitMiddleware, limiter=limiter)])

Key and cost functions receive the ASGI scope (by_ip and by_user read it).
The decision is in scope["state"]["rate_limit"] (Starlette's and Litestar's
request.state.rate_limit). A concurrency limit's lease is held while the
app runs (Leases)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Awaitable, Callable, MutableMapping, Optional

from .decision import Decision
from .http import UNAVAILABLE, Answer, HttpOptions, answer
from .limiter import AsyncRateLimiter, RateLimiterUnavailable
from .limits import ConfigurationError

# Loose ASGI types, so Starlette's and Litestar's (stricter, each its own)
# both accept this middleware.
Scope = Any
Message = MutableMapping[str, Any]
Receive = Any
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Any


async def send_answer(send: Send, result: Answer) -> None:
    body = result.json()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in result.headers.items()]
    await send({"type": "http.response.start", "status": result.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def decide(limiter: AsyncRateLimiter, options: HttpOptions, request: Any) -> tuple[Optional[Decision], Optional[Answer]]:
    """The decision for a request (None: skipped, or Redis unavailable and
    failing open) and the answer, or a 503 when failing closed."""
    if options.skip is not None:
        skipped = options.skip(request)
        if (await skipped) if inspect.isawaitable(skipped) else skipped:
            return None, None
    try:
        decision = await limiter.check(request)
    except RateLimiterUnavailable:
        return None, UNAVAILABLE
    result = answer(decision, options)
    if decision is not None and result.status is None and options.throttle and decision.delay_ms > 0:
        await asyncio.sleep(decision.delay_ms / 1000)
    return decision, result


class Leases:
    """The decisions whose concurrency leases one request holds; released
    (once each: limiter.release) just before the response's last body
    message goes out, the work being done (a client that sends its next
    request on receipt finds its slot free), or when the app returns
    without one: a handler that raised, a client that went away. The same
    wrapper of `send` adds the RateLimit headers to the response's start
    and notes its status (one wrapper a request, not one per job)."""

    def __init__(self) -> None:
        self.held: list[tuple[AsyncRateLimiter, Decision]] = []
        self.status = 500  # the response's, once it starts; 500 if it never does

    def hold(self, limiter: AsyncRateLimiter, decision: Optional[Decision]) -> None:
        if decision is not None and decision.leases:
            self.held.append((limiter, decision))

    async def release(self) -> None:
        for limiter, decision in self.held:
            await limiter.release(decision)

    def releasing(self, send: Send, headers: list[tuple[bytes, bytes]]) -> Send:
        async def send_released(message: Message) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                self.status = int(message["status"])
                if headers:
                    message = {**message, "headers": [*message.get("headers", []), *headers]}
            elif self.held and kind == "http.response.body" and not message.get("more_body", False):
                await self.release()
            await send(message)

        return send_released

    async def run(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send, headers: list[tuple[bytes, bytes]]) -> None:
        """Runs the app with `headers` (read when the response starts: they may
        be added while it runs) on its response; releases the leases."""
        try:
            await app(scope, receive, self.releasing(send, headers))
        finally:
            await self.release()


class RateLimitMiddleware:
    """Limits every HTTP request of the app it wraps."""

    def __init__(self, app: ASGIApp = None, /, limiter: Optional[AsyncRateLimiter] = None, **options: Any) -> None:
        # Starlette passes the app by position (and its typing wants it
        # positional-only), Litestar by keyword: that one arrives in options.
        if app is None:
            app = options.pop("app", None)
        if app is None:
            raise ConfigurationError("app: the ASGI app to wrap is missing")
        if not isinstance(limiter, AsyncRateLimiter):
            raise ConfigurationError(f"limiter: must be an AsyncRateLimiter (got {type(limiter).__name__})")
        self.app = app
        self.limiter = limiter
        self.options = HttpOptions(**options)

    async def __call__(self, scope: Scope, receive: Receive, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        decision, result = await decide(self.limiter, self.options, scope)
        if result is not None and result.status is not None:
            if self.options.handler is not None and decision is not None:
                custom = self.options.handler(scope, decision)
                await (await custom if inspect.isawaitable(custom) else custom)(scope, receive, send)
                return
            await send_answer(send, result)
            return
        scope.setdefault("state", {})["rate_limit"] = decision
        extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (result.headers if result else {}).items()]
        leases = Leases()
        leases.hold(self.limiter, decision)
        try:
            await leases.run(self.app, scope, receive, send, extra)
        finally:
            if self.options.refunds(decision, leases.status):
                assert decision is not None
                await self.limiter.refund(decision)
