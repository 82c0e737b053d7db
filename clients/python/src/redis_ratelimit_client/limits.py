"""A limit: one algorithm, its two parameters, a cost, a partition key and
a policy name. Every option is checked here, when the limit is made, so a
typo or a bad number raises at setup and never disables limiting."""

from __future__ import annotations

import inspect
import math
from decimal import ROUND_HALF_UP, Decimal
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Awaitable, Callable, Literal, Optional, Union

from .outage import POLICIES, OnUnavailable

Algorithm = Literal["tokenbucket", "leakybucket", "fixedwindow", "slidingwindow", "slidinglog", "concurrency"]
ALGORITHMS: tuple[Algorithm, ...] = ("tokenbucket", "leakybucket", "fixedwindow", "slidingwindow", "slidinglog", "concurrency")
BUCKETS = ("tokenbucket", "leakybucket")
#: Each algorithm's second number: the option that gives it, and what it is.
PARAMETERS = {"tokenbucket": "rate", "leakybucket": "rate", "concurrency": "lease"}
QuotaUnit = Literal["requests", "content-bytes", "concurrent-requests"]
QUOTA_UNITS = ("requests", "content-bytes", "concurrent-requests")
MAX_INT = 2**53 - 1  # the module's largest capacity, limit and n

#: A function of the request (whatever object the integration passes); may be async.
KeyFunction = Callable[[Any], Union[str, Awaitable[str]]]
CostFunction = Callable[[Any], Union[int, Awaitable[int]]]
QuotaFunction = Callable[[Any], Union[int, Awaitable[int]]]  # a limit per request (per plan)


class ConfigurationError(ValueError):
    """A bad option, raised when the limiter is made; the message starts
    with the option's path, e.g. `limits[0].rate: required for tokenbucket`."""


def check_integer(path: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_INT:
        raise ConfigurationError(f"{path}: must be an integer from {low} to {MAX_INT} (got {value!r})")
    return value


def _check_number(path: str, value: object, low: float, high: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigurationError(f"{path}: must be a number {what} (got {value!r})")
    if not low <= value <= high:
        raise ConfigurationError(f"{path}: must be a number {what} (got {value!r})")
    return float(value)


def check_name(path: str, name: object) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= 64 or any(not " " <= c <= "~" for c in name):
        raise ConfigurationError(f"{path}: must be 1 to 64 printable ASCII characters (got {name!r})")
    return name


@dataclass(frozen=True)
class Limit:
    """One limit. `limit` is the bucket's capacity, the window's limit or
    the slots held at once; buckets take `rate` (units per second), windows
    `window` (seconds), a concurrency limit `lease` (seconds a slot is held
    at most when it is not released). `on_unavailable`: what this limit
    does while Redis cannot answer (default: the limiter's; "local" for a
    concurrency limit). `retry_after`: a concurrency limit's hint, the
    seconds a denial's Retry-After suggests (default 1)."""

    algorithm: Algorithm = "tokenbucket"
    limit: Union[int, QuotaFunction] = None  # type: ignore[assignment]  # required: checked in validated()
    rate: Optional[float] = None
    window: Optional[float] = None
    lease: Optional[float] = None
    cost: Union[int, CostFunction] = 1
    key: Optional[KeyFunction] = None
    name: Optional[str] = None
    quota_unit: QuotaUnit = "requests"
    on_unavailable: Optional[OnUnavailable] = None
    retry_after: Optional[float] = None

    def validated(self, path: str) -> Limit:
        """This limit, or a ConfigurationError naming the bad option."""
        if self.algorithm not in ALGORITHMS:
            raise ConfigurationError(f"{path}.algorithm: must be one of {', '.join(ALGORITHMS)} (got {self.algorithm!r})")
        if self.limit is None:
            raise ConfigurationError(f"{path}.limit: required")
        if not callable(self.limit):
            check_integer(f"{path}.limit", self.limit, 1)
        option = self.parameter_option
        for other in ("rate", "window", "lease"):
            if other != option and getattr(self, other) is not None:
                raise ConfigurationError(f"{path}.{other}: not an option of {self.algorithm} (it takes {option})")
        if getattr(self, option) is None:
            what = "units per second" if option == "rate" else "seconds"
            raise ConfigurationError(f"{path}.{option}: required for {self.algorithm} ({what})")
        if option == "rate":
            _check_number(f"{path}.rate", self.rate, 1e-6, 1e12, "from 0.000001 to 1e12")
            if not callable(self.limit):
                self.check_fill_time(path, self.limit)
        else:
            _check_number(f"{path}.{option}", getattr(self, option), 0.001, 1e12, "of seconds from 0.001 to 1e12")
        if self.is_concurrency and self.quota_unit not in ("requests", "concurrent-requests"):
            raise ConfigurationError(f"{path}.quota_unit: a concurrency limit counts concurrent-requests (got {self.quota_unit!r})")
        if not callable(self.cost):
            check_integer(f"{path}.cost", self.cost, 0)
        if self.key is not None and not callable(self.key):
            raise ConfigurationError(f"{path}.key: must be a function of the request (got {self.key!r})")
        if self.name is not None:
            check_name(f"{path}.name", self.name)
        if self.quota_unit not in QUOTA_UNITS:
            raise ConfigurationError(f"{path}.quota_unit: must be one of {', '.join(QUOTA_UNITS)} (got {self.quota_unit!r})")
        if self.on_unavailable is not None and self.on_unavailable not in POLICIES:
            raise ConfigurationError(f"{path}.on_unavailable: must be one of {', '.join(POLICIES)} (got {self.on_unavailable!r})")
        if self.retry_after is not None:
            if not self.is_concurrency:
                raise ConfigurationError(f"{path}.retry_after: not an option of {self.algorithm} (a concurrency limit's hint)")
            _check_number(f"{path}.retry_after", self.retry_after, 0.001, 1e12, "of seconds from 0.001 to 1e12")
        return self

    @property
    def is_bucket(self) -> bool:
        return self.algorithm in BUCKETS

    @property
    def is_concurrency(self) -> bool:
        return self.algorithm == "concurrency"

    @property
    def parameter_option(self) -> str:
        return PARAMETERS.get(self.algorithm, "window")

    @property
    def unit(self) -> QuotaUnit:
        """The draft's `qu`: a concurrency limit counts requests in flight."""
        return "concurrent-requests" if self.is_concurrency else self.quota_unit

    @property
    def retry_after_ms(self) -> int:
        """A concurrency limit's Retry-After hint: slots free as requests
        end, long before the leases run out."""
        return max(1, round((1.0 if self.retry_after is None else self.retry_after) * 1000))

    @property
    def parameter(self) -> float:
        """The second number of the limit spec: rate, window or lease."""
        value = {"rate": self.rate, "window": self.window, "lease": self.lease}[self.parameter_option]
        assert value is not None  # validated
        return value

    @cached_property
    def parameter_text(self) -> str:
        """The parameter as the module takes it (once: every request sends it)."""
        return number_text(self.parameter)

    def check_fill_time(self, path: str, limit: int) -> None:
        if self.is_bucket and limit / self.parameter > 1e12:
            raise ConfigurationError(f"{path}.rate: limit / rate must be at most 1e12 seconds")

    def key_name(self, limit: int) -> str:
        """The last part of this limit's Redis key for a request whose quota
        is `limit`: its name; for an unnamed limit, what it is (algorithm,
        limit, rate, window or lease, and a quota unit other than requests), so
        that different unnamed limiters never share state and identical
        ones do."""
        if self.name is not None:
            return self.name
        spec = f"{self.algorithm}:{limit}:{self.parameter_text}"
        return spec if self.quota_unit == "requests" or self.is_concurrency else f"{spec}:{self.quota_unit}"

    def window_seconds(self, limit: int) -> int:
        """The draft's `w` for this limit's quota `limit`: whole seconds, at
        least 1 (a bucket: the time an empty one takes to refill)."""
        seconds = limit / self.parameter if self.is_bucket else self.parameter
        return max(1, math.ceil(seconds))

    def has_async_functions(self) -> bool:
        return any(inspect.iscoroutinefunction(f) for f in (self.cost, self.key, self.limit) if callable(f))


def number_text(value: float) -> str:
    """A decimal as the module reads it: at most six decimals, no exponent,
    the float's exact value rounded half up at the seventh decimal, as the
    module rounds the text it gets (and as Node's toFixed does): 1/128 is
    0.007813 in every client, so their keys and rates agree."""
    text = str(Decimal(value).quantize(_MICRO, rounding=ROUND_HALF_UP)).rstrip("0").rstrip(".")
    return text or "0"


_MICRO = Decimal("0.000001")


def token_bucket(limit: int, rate: float, **options: Any) -> Limit:
    return Limit("tokenbucket", limit, rate=rate, **options)


def leaky_bucket(limit: int, rate: float, **options: Any) -> Limit:
    return Limit("leakybucket", limit, rate=rate, **options)


def fixed_window(limit: int, window: float, **options: Any) -> Limit:
    return Limit("fixedwindow", limit, window=window, **options)


def sliding_window(limit: int, window: float, **options: Any) -> Limit:
    return Limit("slidingwindow", limit, window=window, **options)


def sliding_log(limit: int, window: float, **options: Any) -> Limit:
    return Limit("slidinglog", limit, window=window, **options)


def concurrency(limit: int, lease: float, **options: Any) -> Limit:
    return Limit("concurrency", limit, lease=lease, **options)
