"""What every framework layer shares: its HTTP options (checked at setup)
and what one decision means as an answer. Each layer only adapts its
framework's request and response to these."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .decision import Decision
from .headers import DEFAULT_MESSAGE, HEADERS, UNAVAILABLE_BODY, Body, Headers, denied_body, rate_limit_headers
from .limits import ConfigurationError

#: Attribute a per-view decorator puts on the view: the limiter for that view.
VIEW_LIMITER = "_redis_ratelimit_client_limiter"


@dataclass(frozen=True)
class HttpOptions:
    """`skip(request)` true: not limited. `status_code` and `message` of a
    denial. `skip_failed_requests` / `skip_successful_requests`: responses
    with status >= 400 / < 400 give their units back (RL.REFUND).
    `throttle`: an admitted request first waits its leaky-bucket delay.
    `headers`: which rate-limit fields (headers.py): True or "draft-10",
    "draft-6", "legacy", False; Retry-After on every 429 that can pass later.
    `handler(request, decision)` replaces the denial's answer: it returns
    the framework's response (ASGI: any ASGI app, e.g. a Starlette Response)."""

    skip: Optional[Callable[[Any], Any]] = None
    handler: Optional[Callable[[Any, Decision], Any]] = None
    status_code: int = 429
    message: str = DEFAULT_MESSAGE
    skip_failed_requests: bool = False
    skip_successful_requests: bool = False
    throttle: bool = False
    headers: Headers = True

    def __post_init__(self) -> None:
        if self.skip is not None and not callable(self.skip):
            raise ConfigurationError(f"skip: must be a function of the request (got {self.skip!r})")
        if type(self.status_code) is not int or not 400 <= self.status_code <= 599:
            raise ConfigurationError(f"status_code: must be an HTTP error status 400..599 (got {self.status_code!r})")
        if not isinstance(self.message, str):
            raise ConfigurationError(f"message: must be a string (got {self.message!r})")
        for name in ("skip_failed_requests", "skip_successful_requests", "throttle"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(f"{name}: must be True or False (got {getattr(self, name)!r})")
        if not any(self.headers is choice or (isinstance(choice, str) and self.headers == choice) for choice in HEADERS):
            raise ConfigurationError(f"headers: must be True, 'draft-10', 'draft-6', 'legacy' or False (got {self.headers!r})")

    def refunds(self, decision: Optional[Decision], status: int) -> bool:
        """Whether a response with this status gives the units back."""
        if decision is None or not decision.allowed:
            return False
        return self.skip_failed_requests if status >= 400 else self.skip_successful_requests


@dataclass(frozen=True)
class Answer:
    """What to do with the request: `status` None means let it through
    (adding `headers` to the response); otherwise answer with `status`,
    `headers` and the JSON `body`."""

    status: Optional[int]
    headers: dict[str, str]
    body: Optional[Body] = None

    def json(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":")).encode()


def answer(decision: Optional[Decision], options: HttpOptions) -> Answer:
    if decision is None:  # Redis unavailable, failing open: no headers
        return Answer(None, {})
    headers = rate_limit_headers(decision, options.headers)
    if decision.allowed:
        return Answer(None, headers)
    return Answer(options.status_code, headers, denied_body(decision, options.message))


UNAVAILABLE = Answer(503, {}, dict(UNAVAILABLE_BODY))
