"""The limiter: every limit a request carries, checked in one RL.MULTI
(on a cluster, one per partition key), refunds through RL.REFUND, a look
through RL.PEEK; the module's commands, or the same calls to the Lua
library (mode.py). RateLimiter takes the sync redis-py clients,
AsyncRateLimiter the asyncio ones; both share everything but the I/O."""

from __future__ import annotations

import inspect
import logging
from typing import Any, Awaitable, Callable, Mapping, Optional, Sequence, TypeVar, Union, cast

from redis.exceptions import RedisError

from . import transport
from .commands import Charge, multi_args, multi_results, peek_args, refund_args, result
from .decision import Decision, LimitResult
from .keys import by_ip
from .limits import ConfigurationError, KeyFunction, Limit, check_integer
from .mode import Mode, check_mode

log = logging.getLogger("redis_ratelimit_client")

T = TypeVar("T")


class RateLimiterUnavailable(Exception):
    """Redis was unreachable or too slow and the limiter fails closed (503)."""


Units = Union[int, Mapping[str, int], None]
#: One RL.MULTI's reply: allowed, retry_after_ms, each limit's result.
Outcome = tuple[bool, int, list[LimitResult]]


class _Core:
    """Options, checked at setup, and the steps that need no I/O."""

    def __init__(
        self,
        limits: Sequence[Limit],
        key: Optional[KeyFunction],
        prefix: str,
        timeout: float,
        fail_open: bool,
        mode: Mode,
        allow_async: bool,
    ) -> None:
        single = isinstance(limits, Limit)
        if single:
            limits = [cast(Limit, limits)]
        if not isinstance(limits, (list, tuple)) or not limits:
            raise ConfigurationError("limits: must be a non-empty list of Limit")
        names: set[str] = set()
        self.limits: list[tuple[Limit, str]] = []
        for i, limit in enumerate(limits):
            path = "limits" if single else f"limits[{i}]"
            if not isinstance(limit, Limit):
                raise ConfigurationError(f"{path}: must be a Limit (got {limit!r})")
            limit.validated(path)
            if limit.name is None and len(limits) > 1:
                raise ConfigurationError(f"{path}.name: required when the limiter has more than one limit")
            name = limit.name or "default"
            if name in names:
                raise ConfigurationError(f'{path}.name: duplicate policy name "{name}"')
            names.add(name)
            if not allow_async and limit.has_async_functions():
                raise ConfigurationError(f"{path}: async key, cost or limit functions need AsyncRateLimiter")
            self.limits.append((limit, name))
        if key is not None and not callable(key):
            raise ConfigurationError(f"key: must be a function of the request (got {key!r})")
        if not allow_async and inspect.iscoroutinefunction(key):
            raise ConfigurationError("key: an async key function needs AsyncRateLimiter")
        self.key: KeyFunction = key or by_ip()
        if not isinstance(prefix, str) or "{" in prefix or "}" in prefix:
            raise ConfigurationError(f"prefix: must be a string without {{ or }} (got {prefix!r})")
        self.prefix = prefix
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 60:
            raise ConfigurationError(f"timeout: must be seconds above 0 and at most 60 (got {timeout!r})")
        self.timeout = float(timeout)
        if not isinstance(fail_open, bool):
            raise ConfigurationError(f"fail_open: must be True or False (got {fail_open!r})")
        self.fail_open = fail_open
        self.mode = check_mode(mode)

    @property
    def names(self) -> list[str]:
        return [name for _, name in self.limits]

    def charge(self, limit: Limit, name: str, partition: object, cost: object, quota: object) -> Charge:
        if not isinstance(partition, str):
            raise TypeError(f"{name}: the key function returned {partition!r}, not a string")
        try:  # values from functions, per request: a bad one is a server error, not a setup one
            units = check_integer(f"{name}.cost", cost, 0) if callable(limit.cost) else cast(int, cost)
            size = check_integer(f"{name}.limit", quota, 1) if callable(limit.limit) else cast(int, quota)
            if callable(limit.limit):
                limit.check_fill_time(name, size)
        except ConfigurationError as error:
            raise ValueError(str(error)) from None
        return Charge(limit, name, f"{self.prefix}{{{partition}}}:{limit.key_name(size)}", units, size, partition)

    @staticmethod
    def groups(client: object, charges: list[Charge]) -> list[list[Charge]]:
        """One RL.MULTI for all; on a cluster one per partition key (the part
        of the Redis key in braces), since the keys of one call must share a slot."""
        if not transport.is_cluster(client):
            return [charges]
        by_partition: dict[str, list[Charge]] = {}
        for charge in charges:
            by_partition.setdefault(charge.partition, []).append(charge)
        return list(by_partition.values())

    @staticmethod
    def combine(outcomes: list[Outcome], order: list[Charge]) -> Decision:
        allowed = all(o[0] for o in outcomes)
        waits = [o[1] for o in outcomes if not o[0]]
        retry = 0 if allowed else (-1 if -1 in waits else max(waits))
        if len(outcomes) == 1:  # one call: its results are in the charges' order already
            return Decision(allowed, retry, tuple(outcomes[0][2]))
        by_key = {r.key: r for o in outcomes for r in o[2]}
        return Decision(allowed, retry, tuple(by_key[c.key] for c in order))

    def units(self, decision: Decision, units: Units) -> list[tuple[LimitResult, int]]:
        """What a refund gives back: each limit's cost, or `units` (one number
        for all, or a number per policy name). Nothing for a denied decision:
        it took nothing."""
        out: list[tuple[LimitResult, int]] = []
        if not decision.allowed:
            return out
        for r in decision.limits:
            if units is None:
                n = r.cost
            elif isinstance(units, Mapping):
                n = units.get(r.name, 0)
            else:
                n = units
            if check_integer("units", n, 0) > 0:
                out.append((r, n))
        return out

    def unavailable(self, error: transport.Unavailable, what: str) -> None:
        if not self.fail_open:
            raise RateLimiterUnavailable(str(error)) from error
        log.warning("rate limiter: Redis unavailable (%s), %s: %s", what, "request let through", error)


def _charge_of(r: LimitResult) -> Charge:
    return Charge(r.spec, r.name, r.key, r.cost, r.limit)


class RateLimiter:
    """For redis.Redis and redis.cluster.RedisCluster.

    `check(request)` returns the Decision (taking the units when allowed),
    None when Redis is unavailable and the limiter fails open, raises
    RateLimiterUnavailable when it fails closed, and passes the module's
    (or the script's) error replies on as redis.ResponseError (a server
    error, never a pass). `mode`: "auto", "module" or "script" (mode.py).
    """

    def __init__(
        self,
        redis: transport.SyncClient,
        limits: Union[Limit, Sequence[Limit]],
        *,
        key: Optional[Callable[[Any], str]] = None,
        prefix: str = "ratelimit:",
        timeout: float = 1.0,
        fail_open: bool = True,
        mode: Mode = "auto",
    ) -> None:
        self.redis = transport.check_sync_client(redis)
        self.core = _Core(cast(Sequence[Limit], limits), key, prefix, timeout, fail_open, mode, allow_async=False)

    def with_limits(self, *limits: Limit) -> RateLimiter:
        """This limiter with more limits (a route's), checked in the same call."""
        return RateLimiter(
            self.redis, [*(limit for limit, _ in self.core.limits), *limits], key=self.core.key,  # type: ignore[arg-type]
            prefix=self.core.prefix, timeout=self.core.timeout, fail_open=self.core.fail_open, mode=self.core.mode,
        )

    def charges(self, request: Any) -> list[Charge]:
        out = []
        for limit, name in self.core.limits:
            key = limit.key or self.core.key
            cost = limit.cost(request) if callable(limit.cost) else limit.cost
            quota = limit.limit(request) if callable(limit.limit) else limit.limit
            out.append(self.core.charge(limit, name, key(request), cost, quota))
        return out

    def _call(self, args: list[str]) -> Any:
        return transport.call_sync(self.redis, args, self.core.timeout, self.core.mode)

    def check(self, request: Any = None) -> Optional[Decision]:
        charges = self.charges(request)
        outcomes: list[Outcome] = []
        try:
            for group in self.core.groups(self.redis, charges):
                outcomes.append(multi_results(group, self._call(multi_args(group))))
        except (transport.Unavailable, RedisError) as error:
            self._give_back(outcomes)  # a cluster's earlier calls took units: nothing stays charged
            if not isinstance(error, transport.Unavailable):
                raise
            self.core.unavailable(error, "check")
            return None
        if not all(o[0] for o in outcomes):
            outcomes = self._give_back(outcomes)
        return self.core.combine(outcomes, charges)

    def _give_back(self, outcomes: list[Outcome]) -> list[Outcome]:
        """Refunds the calls that admitted (on a cluster, when another call
        denied or failed); a refund that fails is logged, the outcome stands."""
        out = []
        for outcome in outcomes:
            if outcome[0]:
                try:
                    taken = [_charge_of(r) for r in outcome[2] if r.cost]
                    after = [result(c, self._call(refund_args(c, c.cost))) for c in taken]
                    outcome = (True, 0, _keep_costs(outcome[2], after))
                except (transport.Unavailable, RedisError) as error:
                    log.warning("rate limiter: units taken for a denied request not given back: %s", error)
            out.append(outcome)
        return out

    def peek(self, request: Any = None) -> Optional[Decision]:
        """Would the request be admitted now? Takes nothing (RL.PEEK)."""
        charges = self.charges(request)
        try:
            results = [result(c, self._call(peek_args(c))) for c in charges]
        except transport.Unavailable as error:
            self.core.unavailable(error, "peek")
            return None
        return _peeked(results, charges, self.core)

    def refund(self, decision: Decision, units: Units = None) -> bool:
        """Gives units back (RL.REFUND): each limit's cost by default, or
        `units`, e.g. {"tokens": unused} after reserving the most a request
        may use. False when Redis was unavailable (logged)."""
        try:
            for r, n in self.core.units(decision, units):
                self._call(refund_args(_charge_of(r), n))
        except transport.Unavailable as error:
            log.warning("rate limiter: refund not made, Redis unavailable: %s", error)
            return False
        return True


async def _maybe_await(value: Union[T, Awaitable[T]]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


class AsyncRateLimiter:
    """As RateLimiter, for redis.asyncio.Redis and redis.asyncio.cluster.RedisCluster;
    key and cost functions may be async."""

    def __init__(
        self,
        redis: transport.AsyncClient,
        limits: Union[Limit, Sequence[Limit]],
        *,
        key: Optional[KeyFunction] = None,
        prefix: str = "ratelimit:",
        timeout: float = 1.0,
        fail_open: bool = True,
        mode: Mode = "auto",
    ) -> None:
        self.redis = transport.check_async_client(redis)
        self.core = _Core(cast(Sequence[Limit], limits), key, prefix, timeout, fail_open, mode, allow_async=True)

    def with_limits(self, *limits: Limit) -> AsyncRateLimiter:
        """This limiter with more limits (a route's), checked in the same call."""
        return AsyncRateLimiter(
            self.redis, [*(limit for limit, _ in self.core.limits), *limits], key=self.core.key,
            prefix=self.core.prefix, timeout=self.core.timeout, fail_open=self.core.fail_open, mode=self.core.mode,
        )

    async def charges(self, request: Any) -> list[Charge]:
        out = []
        for limit, name in self.core.limits:
            key = limit.key or self.core.key
            cost = await _maybe_await(limit.cost(request)) if callable(limit.cost) else limit.cost
            quota = await _maybe_await(limit.limit(request)) if callable(limit.limit) else limit.limit
            partition = key(request)
            if not isinstance(partition, str):  # an async key function's awaitable
                partition = await _maybe_await(partition)
            out.append(self.core.charge(limit, name, partition, cost, quota))
        return out

    async def _call(self, args: list[str]) -> Any:
        return await transport.call_async(self.redis, args, self.core.timeout, self.core.mode)

    async def check(self, request: Any = None) -> Optional[Decision]:
        charges = await self.charges(request)
        outcomes: list[Outcome] = []
        try:
            for group in self.core.groups(self.redis, charges):
                outcomes.append(multi_results(group, await self._call(multi_args(group))))
        except (transport.Unavailable, RedisError) as error:
            await self._give_back(outcomes)
            if not isinstance(error, transport.Unavailable):
                raise
            self.core.unavailable(error, "check")
            return None
        if not all(o[0] for o in outcomes):
            outcomes = await self._give_back(outcomes)
        return self.core.combine(outcomes, charges)

    async def _give_back(self, outcomes: list[Outcome]) -> list[Outcome]:
        out = []
        for outcome in outcomes:
            if outcome[0]:
                try:
                    taken = [_charge_of(r) for r in outcome[2] if r.cost]
                    after = [result(c, await self._call(refund_args(c, c.cost))) for c in taken]
                    outcome = (True, 0, _keep_costs(outcome[2], after))
                except (transport.Unavailable, RedisError) as error:
                    log.warning("rate limiter: units taken for a denied request not given back: %s", error)
            out.append(outcome)
        return out

    async def peek(self, request: Any = None) -> Optional[Decision]:
        charges = await self.charges(request)
        try:
            results = [result(c, await self._call(peek_args(c))) for c in charges]
        except transport.Unavailable as error:
            self.core.unavailable(error, "peek")
            return None
        return _peeked(results, charges, self.core)

    async def refund(self, decision: Decision, units: Units = None) -> bool:
        try:
            for r, n in self.core.units(decision, units):
                await self._call(refund_args(_charge_of(r), n))
        except transport.Unavailable as error:
            log.warning("rate limiter: refund not made, Redis unavailable: %s", error)
            return False
        return True


def _keep_costs(taken: list[LimitResult], refunded: list[LimitResult]) -> list[LimitResult]:
    """The state after the refund, for the limits that admitted in a call
    whose request was denied elsewhere."""
    after = {r.key: r for r in refunded}
    return [after.get(r.key, r) for r in taken]


def _peeked(results: list[LimitResult], charges: list[Charge], core: _Core) -> Decision:
    outcome = (all(r.allowed for r in results), 0, results)
    if not outcome[0]:
        waits = [r.retry_after_ms for r in results if not r.allowed]
        outcome = (False, -1 if -1 in waits else max(waits), results)
    return core.combine([outcome], charges)
