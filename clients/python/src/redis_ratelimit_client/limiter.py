"""The limiter: every limit a request carries, checked in one RL.MULTI
(on a cluster, one per partition key), refunds through RL.REFUND, a look
through RL.PEEK; the module's commands, or the same calls to the Lua
library (mode.py). RateLimiter takes the sync redis-py clients,
AsyncRateLimiter the asyncio ones; both share everything but the I/O."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import threading
import time
from typing import Any, Awaitable, Callable, Mapping, Optional, Sequence, TypeVar, Union, cast

from redis.exceptions import RedisError

from . import transport
from .commands import Charge, charge_of, give_back_args, given_back, multi_args, multi_results, peek_args, refund_args, release_args, renew_args, result, taken_back
from .deadlines import Deadlines
from .decision import Decision, LimitResult
from .denials import DenialCache
from .local import LocalLimiter, micros
from .metrics import Metrics, OnDecision
from .outage import POLICIES, OnUnavailable, Outage
from .keys import by_ip
from .limits import ConfigurationError, KeyFunction, Limit, check_integer
from .mode import Mode, check_mode

log = logging.getLogger("redis_ratelimit_client")

T = TypeVar("T")


class RateLimiterUnavailable(Exception):
    """Redis was unreachable or too slow and the limiter fails closed (503)."""


Units = Optional[Mapping[str, int]]
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
        fail_open: Optional[bool],
        on_unavailable: Optional[OnUnavailable],
        instances: int,
        mode: Mode,
        denial_cache: int,
        on_decision: Optional[OnDecision],
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
        if fail_open is not None and not isinstance(fail_open, bool):
            raise ConfigurationError(f"fail_open: must be True or False (got {fail_open!r})")
        if fail_open is not None and on_unavailable is not None:
            raise ConfigurationError("fail_open: give on_unavailable or fail_open (its old form), not both")
        if on_unavailable is not None and on_unavailable not in POLICIES:
            raise ConfigurationError(f"on_unavailable: must be one of {', '.join(POLICIES)} (got {on_unavailable!r})")
        self.on_unavailable: OnUnavailable = on_unavailable or ("closed" if fail_open is False else "open")
        if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
            raise ConfigurationError(f"instances: must be an integer >= 1, the processes sharing the limits (got {instances!r})")
        self.instances = instances
        self.outage = Outage()
        self.local = LocalLimiter() if self.on_unavailable == "local" else None
        self.mode = check_mode(mode)
        if isinstance(denial_cache, bool) or not isinstance(denial_cache, int) or denial_cache < 0:
            raise ConfigurationError(f"denial_cache: must be an integer >= 0, the most denials kept (0: off) (got {denial_cache!r})")
        self.denials = DenialCache(denial_cache)
        if on_decision is not None and not callable(on_decision):
            raise ConfigurationError(f"on_decision: must be a function of a DecisionEvent (got {on_decision!r})")
        self.metrics = Metrics(",".join(self.names), on_decision)

    def limits_and(self, more: Sequence[Limit]) -> list[Limit]:
        """These limits, then `more` (with_limits)."""
        return [*(limit for limit, _ in self.limits), *more]

    def options(self) -> dict[str, Any]:
        """The keyword options this limiter was made with, as checked (with_limits)."""
        return {
            "key": self.key, "prefix": self.prefix, "timeout": self.timeout, "on_unavailable": self.on_unavailable, "instances": self.instances,
            "mode": self.mode, "denial_cache": self.denials.size, "on_decision": self.metrics.on_decision,
        }

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

    def decided(self, outcomes: list[Outcome], charges: list[Charge], seconds: float) -> Decision:
        """Redis's decision for a check; a denial is remembered (denials.py)."""
        decision = self.combine(outcomes, charges)
        self.denials.remember(charges, decision)
        self.metrics.decided("allowed" if decision.allowed else "denied", decision, seconds, None)
        return decision

    def cached(self, charges: list[Charge]) -> Optional[Decision]:
        decision = self.denials.answer(charges)
        if decision is not None:
            self.metrics.decided("denied_in_process", decision, None, None)
        return decision

    def units(self, decision: Decision, units: Units) -> list[tuple[LimitResult, int]]:
        """What a refund gives back: each limit's cost, or the units per
        policy name in `units` (only those limits get units back, at most
        what each took); never a concurrency limit's (release() frees it).
        Nothing for a denied decision: it took nothing; nor for one made in
        process (on_unavailable="local"): its units were never taken in Redis."""
        if units is not None and not isinstance(units, Mapping):
            raise TypeError(
                f"refund: units must be a mapping of policy name to units, e.g. {{{decision.limits[0].name!r}: 3}} "
                f"(got {units!r}; a bare number was ambiguous: it gave that many back to every limit)"
            )
        names = {r.name: r for r in decision.limits}
        for name, n in (units or {}).items():
            if name not in names:
                raise ValueError(f"refund: no limit named {name!r} in the decision (its limits: {', '.join(sorted(names))})")
            if names[name].spec.is_concurrency:
                raise TypeError(f"refund[{name!r}]: a concurrency limit takes no refund: its lease is freed by limiter.release(decision)")
            check_integer(f"refund[{name!r}]", n, 0)
        out: list[tuple[LimitResult, int]] = []
        if not decision.allowed or decision.local:
            return out
        for r in decision.limits:
            if r.spec.is_concurrency:
                continue  # a lease is released, not refunded
            n = r.cost if units is None else units.get(r.name, 0)
            if n > r.cost:
                raise ValueError(f"refund[{r.name!r}]: {n} is more than the {r.cost} the request took")
            if n > 0:
                out.append((r, n))
        return out

    def to_release(self, decision: Decision) -> tuple[LimitResult, ...]:
        """The leases a release() frees: the decision's, the first time only.
        A decision made in process gives its leases back here and now."""
        if not decision.leases or not decision.release_once.first():
            return ()
        if decision.local:
            assert self.local is not None
            now_us = time.time_ns() // 1000
            for held in decision.leases:
                self.local.release(held.key, cast(int, held.lease_id), now_us)
            return ()
        if self.down():  # no wait for a Redis that is down
            log.warning("rate limiter: leases not released, Redis unavailable: they run out by themselves")
            return ()
        return decision.leases

    def renewed_locally(self, decision: Decision) -> bool:
        """Renews in process: a decision made there holds the process's leases."""
        assert self.local is not None
        now_us = time.time_ns() // 1000
        replies = [self.local.renew(held.key, cast(int, held.lease_id), micros(held.spec.parameter_text), now_us) for held in decision.leases]
        return all(reply[0] == 1 for reply in replies)

    def renewed_without_redis(self, decision: Decision) -> Optional[bool]:
        """renew()'s answer when it needs no Redis call: False without a
        lease, in process for a decision made there; RateLimiterUnavailable
        at once while Redis is down. None: ask Redis."""
        if not decision.leases:
            return False
        if decision.local:
            return self.renewed_locally(decision)
        if self.down():
            raise RateLimiterUnavailable(str(self.still_down()))
        return None

    def renew_failed(self, error: transport.Unavailable) -> RateLimiterUnavailable:
        """Redis could not renew: what renew() raises (the work can stop)."""
        self.failed(error)
        return RateLimiterUnavailable(str(error))

    def release_failed(self, error: Exception) -> None:
        """A lease not released stays held until it runs out: logged, never raised."""
        if isinstance(error, transport.Unavailable):
            self.failed(error)
        log.warning("rate limiter: lease not released, it runs out by itself: %s", error)

    def failed(self, error: transport.Unavailable) -> None:
        """Redis failed: the policy answers until a probe gets through (outage.py)."""
        if self.outage.failed(str(error)):
            log.warning("rate limiter: Redis unavailable, answering by on_unavailable=%r until it is back: %s", self.on_unavailable, error)

    def unavailable(self, error: Exception, charges: list[Charge], seconds: Optional[float] = None) -> Optional[Decision]:
        """The policy's answer while Redis is unavailable."""
        if self.on_unavailable == "closed":
            self.metrics.decided("unavailable_closed", None, seconds, error)
            raise RateLimiterUnavailable(str(error)) from error
        if self.local is None:
            self.metrics.decided("unavailable_open", None, seconds, error)
            return None
        decision = self.local_decision(charges)
        self.metrics.decided("unavailable_local_allowed" if decision.allowed else "unavailable_local_denied", decision, seconds, error)
        return decision

    def local_decision(self, charges: list[Charge]) -> Decision:
        """In process, each limit divided among `instances` (local.py)."""
        shares = [dataclasses.replace(c, limit=max(1, c.limit // self.instances)) for c in charges]
        specs = [(c.spec.algorithm, c.limit, c.spec.parameter_text, c.cost) for c in shares]
        assert self.local is not None
        reply = self.local.multi([c.key for c in shares], time.time_ns() // 1000, specs)
        return dataclasses.replace(self.combine([multi_results(shares, reply)], shares), local=True)

    def peek_unavailable(self, error: Exception) -> Optional[Decision]:
        if self.on_unavailable == "closed":
            raise RateLimiterUnavailable(str(error)) from error
        return None

    def still_down(self) -> transport.Unavailable:
        return transport.Unavailable(f"{self.outage.error} (Redis unavailable: tried again about once a second)")

    def down(self) -> bool:
        return self.outage.down


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
        fail_open: Optional[bool] = None,
        on_unavailable: Optional[OnUnavailable] = None,
        instances: int = 1,
        mode: Mode = "auto",
        denial_cache: int = 10_000,
        on_decision: Optional[OnDecision] = None,
    ) -> None:
        self.redis = transport.check_sync_client(redis)
        self.core = _Core(cast(Sequence[Limit], limits), key, prefix, timeout, fail_open, on_unavailable, instances, mode, denial_cache, on_decision, allow_async=False)

    def with_limits(self, *limits: Limit) -> RateLimiter:
        """This limiter with more limits (a route's), checked in the same call."""
        return RateLimiter(self.redis, self.core.limits_and(limits), **self.core.options())

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

    def _probe(self, charge: Charge) -> None:
        """At most one at a time, about once a second: an RL.PEEK (it takes
        nothing) in a thread of its own, so no request waits for it."""
        if not self.core.outage.probe_due():
            return

        def run() -> None:
            answered = True
            try:
                self._call(peek_args(charge))
            except transport.Unavailable:
                answered = False
            except RedisError:
                pass  # an error reply is an answer: Redis is back
            self.core.outage.probed(answered)

        threading.Thread(target=run, name="redis-ratelimit-probe", daemon=True).start()

    def check(self, request: Any = None) -> Optional[Decision]:
        charges = self.charges(request)
        cached = self.core.cached(charges)
        if cached is not None:
            return cached
        if self.core.down():  # answered by the policy; a probe tries Redis about once a second
            self._probe(charges[0])
            return self.core.unavailable(self.core.still_down(), charges)
        outcomes: list[Outcome] = []
        started = time.perf_counter()
        try:
            for group in self.core.groups(self.redis, charges):
                outcomes.append(multi_results(group, self._call(multi_args(group))))
        except (transport.Unavailable, RedisError) as error:
            seconds = time.perf_counter() - started
            self.core.metrics.redis_call(seconds, error)
            self._give_back(outcomes)  # a cluster's earlier calls took units: nothing stays charged
            if not isinstance(error, transport.Unavailable):
                raise
            self.core.failed(error)
            return self.core.unavailable(error, charges, seconds)
        seconds = time.perf_counter() - started
        self.core.metrics.redis_call(seconds, None)
        if not all(o[0] for o in outcomes):
            outcomes = self._give_back(outcomes)
        return self.core.decided(outcomes, charges, seconds)

    def _give_back(self, outcomes: list[Outcome]) -> list[Outcome]:
        """Gives back what the calls that admitted took (on a cluster, when
        another call denied or failed): units refunded, leases released; a
        call that fails is logged, the outcome stands."""
        out = []
        for outcome in outcomes:
            if outcome[0]:
                try:
                    after = {r.key: given_back(r, self._call(give_back_args(r))) for r in outcome[2] if taken_back(r)}
                    outcome = (True, 0, [after.get(r.key, r) for r in outcome[2]])
                except (transport.Unavailable, RedisError) as error:
                    log.warning("rate limiter: units taken for a denied request not given back: %s", error)
            out.append(outcome)
        return out

    def peek(self, request: Any = None) -> Optional[Decision]:
        """Would the request be admitted now? Takes nothing (RL.PEEK)."""
        charges = self.charges(request)
        if self.core.down():
            return self.core.peek_unavailable(self.core.still_down())
        try:
            results = [result(c, self._call(peek_args(c))) for c in charges]
        except transport.Unavailable as error:
            self.core.failed(error)
            return self.core.peek_unavailable(error)
        return _peeked(results, charges, self.core)

    def refund(self, decision: Decision, units: Units = None) -> bool:
        """Gives units back (RL.REFUND): each limit's cost by default, or
        units per policy name, e.g. {"tokens": unused} after reserving the
        most a request may use (the other limits keep theirs). False when
        Redis was unavailable (logged)."""
        given = self.core.units(decision, units)
        if given and self.core.down():
            return False  # logged when the outage began
        try:
            for r, n in given:
                self._call(refund_args(charge_of(r), n))
        except transport.Unavailable as error:
            self.core.failed(error)
            log.warning("rate limiter: refund not made, Redis unavailable: %s", error)
            return False
        return True

    def release(self, decision: Decision) -> None:
        """Frees the leases of the decision's concurrency limits
        (RL.RELEASE, one call per lease), the first time it is called for
        the decision; later calls, and a decision without leases, do
        nothing. Never raises for Redis: a lease not released is logged
        and runs out by itself."""
        for held in self.core.to_release(decision):
            try:
                self._call(release_args(held))
            except (transport.Unavailable, RedisError) as error:
                self.core.release_failed(error)

    def renew(self, decision: Decision) -> bool:
        """Makes each lease the decision holds run its limit's `lease`
        from now (RL.RENEW, one call per lease), for work that outlasts it.
        True when every one was still held; False when one had run out or
        been released, or the decision holds none. Raises
        RateLimiterUnavailable when Redis cannot answer, so the work can
        stop; an error reply as it came."""
        answered = self.core.renewed_without_redis(decision)
        if answered is not None:
            return answered
        try:
            return all([int(self._call(renew_args(held))[0]) == 1 for held in decision.leases])
        except transport.Unavailable as error:
            raise self.core.renew_failed(error) from error


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
        fail_open: Optional[bool] = None,
        on_unavailable: Optional[OnUnavailable] = None,
        instances: int = 1,
        mode: Mode = "auto",
        denial_cache: int = 10_000,
        on_decision: Optional[OnDecision] = None,
    ) -> None:
        self.redis = transport.check_async_client(redis)
        self.core = _Core(cast(Sequence[Limit], limits), key, prefix, timeout, fail_open, on_unavailable, instances, mode, denial_cache, on_decision, allow_async=True)
        self._probes: set[asyncio.Future[None]] = set()
        self._deadlines = Deadlines(self.core.timeout)

    def with_limits(self, *limits: Limit) -> AsyncRateLimiter:
        """This limiter with more limits (a route's), checked in the same call."""
        return AsyncRateLimiter(self.redis, self.core.limits_and(limits), **self.core.options())

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
        return await transport.call_async(self.redis, args, self._deadlines, self.core.mode)

    def _probe(self, charge: Charge) -> None:
        """As RateLimiter's, in a task of its own."""
        if not self.core.outage.probe_due():
            return

        async def run() -> None:
            answered = True
            try:
                await self._call(peek_args(charge))
            except transport.Unavailable:
                answered = False
            except RedisError:
                pass
            finally:
                self.core.outage.probed(answered)

        task = asyncio.ensure_future(run())
        self._probes.add(task)  # a reference, or the loop may drop the task
        task.add_done_callback(self._probes.discard)

    async def check(self, request: Any = None) -> Optional[Decision]:
        charges = await self.charges(request)
        cached = self.core.cached(charges)
        if cached is not None:
            return cached
        if self.core.down():  # answered by the policy; a probe tries Redis about once a second
            self._probe(charges[0])
            return self.core.unavailable(self.core.still_down(), charges)
        outcomes: list[Outcome] = []
        started = time.perf_counter()
        try:
            for group in self.core.groups(self.redis, charges):
                outcomes.append(multi_results(group, await self._call(multi_args(group))))
        except (transport.Unavailable, RedisError) as error:
            seconds = time.perf_counter() - started
            self.core.metrics.redis_call(seconds, error)
            await self._give_back(outcomes)
            if not isinstance(error, transport.Unavailable):
                raise
            self.core.failed(error)
            return self.core.unavailable(error, charges, seconds)
        seconds = time.perf_counter() - started
        self.core.metrics.redis_call(seconds, None)
        if not all(o[0] for o in outcomes):
            outcomes = await self._give_back(outcomes)
        return self.core.decided(outcomes, charges, seconds)

    async def _give_back(self, outcomes: list[Outcome]) -> list[Outcome]:
        out = []
        for outcome in outcomes:
            if outcome[0]:
                try:
                    after = {r.key: given_back(r, await self._call(give_back_args(r))) for r in outcome[2] if taken_back(r)}
                    outcome = (True, 0, [after.get(r.key, r) for r in outcome[2]])
                except (transport.Unavailable, RedisError) as error:
                    log.warning("rate limiter: units taken for a denied request not given back: %s", error)
            out.append(outcome)
        return out

    async def peek(self, request: Any = None) -> Optional[Decision]:
        charges = await self.charges(request)
        if self.core.down():
            return self.core.peek_unavailable(self.core.still_down())
        try:
            results = [result(c, await self._call(peek_args(c))) for c in charges]
        except transport.Unavailable as error:
            self.core.failed(error)
            return self.core.peek_unavailable(error)
        return _peeked(results, charges, self.core)

    async def refund(self, decision: Decision, units: Units = None) -> bool:
        given = self.core.units(decision, units)
        if given and self.core.down():
            return False  # logged when the outage began
        try:
            for r, n in given:
                await self._call(refund_args(charge_of(r), n))
        except transport.Unavailable as error:
            self.core.failed(error)
            log.warning("rate limiter: refund not made, Redis unavailable: %s", error)
            return False
        return True

    async def renew(self, decision: Decision) -> bool:
        """As RateLimiter.renew."""
        answered = self.core.renewed_without_redis(decision)
        if answered is not None:
            return answered
        try:
            return all([int((await self._call(renew_args(held)))[0]) == 1 for held in decision.leases])
        except transport.Unavailable as error:
            raise self.core.renew_failed(error) from error

    async def release(self, decision: Decision) -> None:
        """As RateLimiter.release."""
        for held in self.core.to_release(decision):
            try:
                await self._call(release_args(held))
            except (transport.Unavailable, RedisError) as error:
                self.core.release_failed(error)


def _peeked(results: list[LimitResult], charges: list[Charge], core: _Core) -> Decision:
    outcome = (all(r.allowed for r in results), 0, results)
    if not outcome[0]:
        waits = [r.retry_after_ms for r in results if not r.allowed]
        outcome = (False, -1 if -1 in waits else max(waits), results)
    return core.combine([outcome], charges)
