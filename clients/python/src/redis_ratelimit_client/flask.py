"""A Flask extension with a per-view decorator:

    rate_limit = FlaskRateLimit(app, limiter)          # every view
    @app.get("/search")
    @rate_limit.limit(limiter.with_limits(Limit(...))) # this view: these limits instead, in one call
    @rate_limit.exempt                                 # or none

Key and cost functions receive flask.request. The decision is in
flask.g.rate_limit."""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

from flask import Flask, Response, g, make_response, request

from .http import VIEW_LIMITER, HttpOptions
from .limiter import RateLimiter
from .wsgi import check_limiter, decide, release_when_done

View = TypeVar("View", bound=Callable[..., Any])
EXEMPT = object()


class FlaskRateLimit:
    """`limiter` limits every view (None: only the decorated ones)."""

    def __init__(self, app: Optional[Flask] = None, limiter: Optional[RateLimiter] = None, **options: Any) -> None:
        self.limiter = None if limiter is None else check_limiter(limiter)
        self.options = HttpOptions(**options)
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        app.extensions["redis_ratelimit_client"] = self
        app.before_request(self._before)
        app.after_request(self._after)
        app.teardown_request(self._teardown)

    def limit(self, limiter: RateLimiter) -> Callable[[View], View]:
        """This view is limited by `limiter` (instead of the app's)."""
        chosen = check_limiter(limiter)

        def mark(view: View) -> View:
            setattr(view, VIEW_LIMITER, chosen)
            return view

        return mark

    def exempt(self, view: View) -> View:
        setattr(view, VIEW_LIMITER, EXEMPT)
        return view

    def _before(self) -> Optional[Response]:
        from flask import current_app

        view = current_app.view_functions.get(request.endpoint or "")
        limiter = getattr(view, VIEW_LIMITER, self.limiter)
        g.rate_limit = None
        if limiter is None or limiter is EXEMPT:
            return None
        decision, result = decide(limiter, self.options, request._get_current_object())  # type: ignore[attr-defined]
        g.rate_limit, g.rate_limit_limiter = decision, limiter
        g.rate_limit_headers = result.headers if result else {}
        if result is not None and result.status is not None:
            if self.options.handler is not None and decision is not None:
                return make_response(self.options.handler(request, decision))
            return Response(result.json(), status=result.status, headers=result.headers, mimetype="application/json")
        return None

    def _after(self, response: Response) -> Response:
        decision = g.get("rate_limit")
        if decision is not None and decision.allowed:
            response.headers.update(g.get("rate_limit_headers", {}))
            if self.options.refunds(decision, response.status_code):
                g.rate_limit_limiter.refund(decision)
            body: Any = release_when_done(g.rate_limit_limiter, decision, response.response if response.is_streamed else None)
            if body is not None:
                response.response = body
        return response

    def _teardown(self, error: Optional[BaseException]) -> None:
        """A view that raised past Flask's error handling (PROPAGATE_EXCEPTIONS) skips _after."""
        decision = g.get("rate_limit")
        if error is not None and decision is not None:
            g.rate_limit_limiter.release(decision)
