"""A FastAPI dependency, per route or per router:

    limit = RateLimit(limiter)
    app.add_middleware(RateLimitHeadersMiddleware)
    app.add_exception_handler(RateLimitExceeded, rate_limit_exceeded_handler)

    @app.get("/search", dependencies=[Depends(limit)])

Key and cost functions receive the Starlette Request. A denial raises
RateLimitExceeded, which the handler turns into the 429 (or 503) answer.
The headers of an admitted request go on its response through
RateLimitHeadersMiddleware: FastAPI drops the headers a dependency sets
when the route returns a Response of its own, so the dependency leaves
them in the ASGI scope and the middleware adds them to whatever response
goes out."""

from __future__ import annotations

import inspect
from typing import Any, Optional

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .asgi import Leases, decide
from .decision import Decision
from .http import Answer
from .http import HttpOptions
from .limiter import AsyncRateLimiter
from .limits import ConfigurationError


#: The ASGI scope's entry where RateLimitHeadersMiddleware collects the
#: headers the dependencies give an admitted request.
HEADERS = "redis_ratelimit_client.headers"
#: ... and the concurrency leases they took, which it releases (asgi.Leases).
LEASES = "redis_ratelimit_client.leases"


class RateLimitHeadersMiddleware:
    """Puts the RateLimit headers of the RateLimit dependencies on the
    response, whatever the route returns (a value, or a Response), and
    releases the concurrency leases they took when the response is done."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = []
        scope[HEADERS] = headers
        scope[LEASES] = leases = Leases()
        await leases.run(self.app, scope, receive, send, headers)


class RateLimitExceeded(Exception):
    """A denied (429) or failed-closed (503) request; its `answer` is the response."""

    def __init__(self, answer: Answer, decision: Optional[Decision], response: Optional[Response] = None) -> None:
        super().__init__(f"rate limit: HTTP {answer.status}")
        self.answer = answer
        self.decision = decision
        self.response = response  # the `handler` option's, when it has one


async def rate_limit_exceeded_handler(request: Request, error: Exception) -> Response:
    assert isinstance(error, RateLimitExceeded)
    if error.response is not None:
        return error.response
    return JSONResponse(error.answer.body, status_code=error.answer.status or 429, headers=error.answer.headers)


class RateLimit:
    """The dependency; returns the Decision (None when skipped or failing open).
    Takes the HttpOptions but skip_failed_requests / skip_successful_requests,
    which need the response: use RateLimitMiddleware for those."""

    def __init__(self, limiter: AsyncRateLimiter, **options: Any) -> None:
        if not isinstance(limiter, AsyncRateLimiter):
            raise ConfigurationError(f"limiter: must be an AsyncRateLimiter (got {type(limiter).__name__})")
        for name in ("skip_failed_requests", "skip_successful_requests"):
            if name in options:
                raise ConfigurationError(f"{name}: not an option of the dependency (use RateLimitMiddleware)")
        self.limiter = limiter
        self.options = HttpOptions(**options)

    async def __call__(self, request: Request) -> Optional[Decision]:
        headers = request.scope.get(HEADERS)
        if headers is None:  # checked before any unit is taken
            raise ConfigurationError(
                "RateLimit: the app needs RateLimitHeadersMiddleware to send the RateLimit headers"
                " (app.add_middleware(RateLimitHeadersMiddleware))"
            )
        decision, result = await decide(self.limiter, self.options, request)
        if result is not None and result.status is not None:
            custom = None
            if self.options.handler is not None and decision is not None:
                custom = self.options.handler(request, decision)
                custom = await custom if inspect.isawaitable(custom) else custom
            raise RateLimitExceeded(result, decision, custom)
        if result is not None:
            headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in result.headers.items()]
        request.scope[LEASES].hold(self.limiter, decision)
        request.state.rate_limit = decision
        return decision
