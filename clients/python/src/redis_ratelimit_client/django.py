"""A Django middleware with a per-view decorator.

    # settings.py
    MIDDLEWARE = [..., "redis_ratelimit_client.django.RateLimitMiddleware"]
    RATE_LIMIT = {"limiter": "myproject.limits.limiter", "skip_failed_requests": True}   # limiter: a dotted path

    @rate_limit(limiter.with_limits(Limit(...)))   # this view: these limits instead, in one call
    @rate_limit(None)                               # this view: none

Without the middleware the decorator checks its view by itself. Key and
cost functions receive the HttpRequest (by_user reads request.user, so put
the middleware after AuthenticationMiddleware). The decision is in
request.rate_limit."""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, TypeVar

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.module_loading import import_string

from .http import VIEW_LIMITER, Answer, HttpOptions
from .limiter import RateLimiter
from .limits import ConfigurationError
from .wsgi import check_limiter, decide, release_when_done

View = TypeVar("View", bound=Callable[..., HttpResponse])
HANDLED = "_redis_ratelimit_client_handled"
PENDING = "_redis_ratelimit_client_pending"
EXEMPT = object()


def _response(result: Answer) -> HttpResponse:
    response = JsonResponse(result.body, status=result.status or 429, json_dumps_params={"separators": (",", ":")})
    for name, value in result.headers.items():
        response[name] = value
    return response


def _settings() -> tuple[Optional[RateLimiter], HttpOptions]:
    config = dict(getattr(settings, "RATE_LIMIT", {}))
    limiter = config.pop("limiter", None)
    if isinstance(limiter, str):
        limiter = import_string(limiter)
    try:
        return (None if limiter is None else check_limiter(limiter)), HttpOptions(**config)
    except (ConfigurationError, TypeError) as error:
        raise ConfigurationError(f"settings.RATE_LIMIT: {error}") from error


def _check(request: HttpRequest, limiter: RateLimiter, options: HttpOptions) -> Optional[HttpResponse]:
    """Checks the request; the denial's response, or None (the headers and
    what a refund needs are kept on the request for _finish)."""
    setattr(request, HANDLED, True)
    decision, result = decide(limiter, options, request)
    setattr(request, "rate_limit", decision)
    if result is not None and result.status is not None:
        if options.handler is not None and decision is not None:
            response: HttpResponse = options.handler(request, decision)
            return response
        return _response(result)
    setattr(request, PENDING, (limiter, options, decision, result.headers if result else {}))
    return None


def _finish(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    pending = getattr(request, PENDING, None)
    if pending is not None:
        limiter, options, decision, headers = pending
        for name, value in headers.items():
            response[name] = value
        if options.refunds(decision, response.status_code):
            limiter.refund(decision)
        streaming: Any = response  # a StreamingHttpResponse is no HttpResponse subclass, but views return it too
        body = release_when_done(limiter, decision, streaming.streaming_content if streaming.streaming else None)
        if body is not None:
            streaming.streaming_content = body
    return response


def _failed(request: HttpRequest) -> None:
    """The view raised (no middleware turned it into a response): its leases go back."""
    pending = getattr(request, PENDING, None)
    if pending is not None:
        limiter, _, decision, _ = pending
        if decision is not None:
            limiter.release(decision)


class RateLimitMiddleware:
    """Limits every view by settings.RATE_LIMIT["limiter"], or by the one
    its decorator names. Responses made from the view's exceptions (404...)
    count as failed requests too."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.limiter, self.options = _settings()

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            response = self.get_response(request)
        except BaseException:
            # The view is done: it raised past Django's handling, or, under
            # ASGI, its request was cancelled (the client went away). asgiref
            # runs a sync view in this thread, so it has returned by now.
            _failed(request)
            raise
        return _finish(request, response)

    def process_view(self, request: HttpRequest, view: Callable[..., HttpResponse], args: Any, kwargs: Any) -> Optional[HttpResponse]:
        limiter = getattr(view, VIEW_LIMITER, self.limiter)
        if limiter is None or limiter is EXEMPT:
            setattr(request, HANDLED, True)
            return None
        return _check(request, limiter, self.options)


def rate_limit(limiter: Optional[RateLimiter], **options: Any) -> Callable[[View], View]:
    """This view is limited by `limiter` (None: not at all). Options apply
    when no middleware is installed (else settings.RATE_LIMIT's do)."""
    chosen: object = EXEMPT if limiter is None else check_limiter(limiter)
    own_options = HttpOptions(**options)

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if getattr(request, HANDLED, False) or chosen is EXEMPT:
                return view(request, *args, **kwargs)
            assert isinstance(chosen, RateLimiter)
            denied = _check(request, chosen, own_options)
            if denied is not None:
                return denied
            try:
                response = view(request, *args, **kwargs)
            except BaseException:
                _failed(request)
                raise
            return _finish(request, response)

        setattr(limited, VIEW_LIMITER, chosen)
        return limited  # type: ignore[return-value]

    return decorate
