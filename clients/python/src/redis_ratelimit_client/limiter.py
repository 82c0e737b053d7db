"""The limiter: every limit a request carries, checked in one call (the
limit's own command when there is one, else RL.MULTI; on a cluster, one
per partition key), refunds through RL.REFUND, a look
through RL.PEEK, leases freed and renewed through RL.RELEASE and RL.RENEW;
the module's commands, or the same calls to the Lua library (mode.py).

Each of these is written once, in Core, as a flow: a generator that
yields the module calls it needs and gets their replies (or their errors)
back, doing no I/O itself. RateLimiter drives a flow with redis-py's sync
clients (`flow.send(call())`), AsyncRateLimiter with its asyncio ones
(`flow.send(await call())`): a fix to a flow is made once, for both."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
import threading
import time
from typing import Any, Awaitable, Callable, Generator, Generic, Mapping, Optional, Sequence, TypeVar, Union, cast

from redis.exceptions import RedisError

from . import transport
from .commands import Call, Charge, charge_of, give_back_args, given_back, multi_results, peek_args, refund_args, release_args, renew_args
from .commands import check_args, check_results, result, taken_back, undo_args
from .deadlines import Deadlines
from .decision import Decision, LimitResult
from .denials import DenialCache
from .limits import ConfigurationError, KeyFunction, Limit, check_integer
from .local import LocalLimiter, micros, share
from .metrics import Metrics, OnDecision
from .mode import Mode
from .script import ScriptCall
from .options import Options
from .outage import OnUnavailable, Outage

log = logging.getLogger("redis_ratelimit_client")

T = TypeVar("T")


class RateLimiterUnavailable(Exception):
    """Redis was unreachable or too slow and the limiter fails closed (503)."""


class Await:
    """What a flow of the asyncio limiter yields for a value its driver
    must await (an async key, cost or limit function's result)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


#: Yields module calls or Await; gets each reply back.
Flow = Generator[Union[Call, Await], Any, T]
#: Runs a flow in the background (a thread, a task): the probe.
Background = Callable[[Flow[None]], None]
Units = Optional[Mapping[str, int]]
#: One check_args call's reply: allowed, retry_after_ms, each limit's result.
Outcome = tuple[bool, int, list[LimitResult]]


class Core:
    """What both limiters do, as flows, and the steps that need no Redis."""

    def __init__(self, options: Options, cluster: bool) -> None:
        self.options = options
        self.cluster = cluster
        self.outage = Outage()
        self.local = LocalLimiter() if "local" in options.policies.values() else None
        self.denials = DenialCache(options.denial_cache)
        self.metrics = Metrics(",".join(options.names), options.on_decision)

    # The flows.

    def charges(self, request: Any) -> Flow[list[Charge]]:
        """Each limit applied to the request: its key, cost and limit (the
        asyncio limiter's functions may be async: their results are awaited)."""
        out = []
        wait = self.options.allow_async
        for limit, name in self.options.limits:
            key = limit.key or self.options.key
            cost = limit.cost(request) if callable(limit.cost) else limit.cost
            if wait and inspect.isawaitable(cost):
                cost = yield Await(cost)
            quota = limit.limit(request) if callable(limit.limit) else limit.limit
            if wait and inspect.isawaitable(quota):
                quota = yield Await(quota)
            partition = key(request)
            if wait and not isinstance(partition, str) and inspect.isawaitable(partition):
                partition = yield Await(partition)
            out.append(self.charge(limit, name, partition, cost, quota))
        return out

    def check(self, request: Any, background: Background) -> Flow[Optional[Decision]]:
        charges = yield from self.charges(request)
        cached = self.cached(charges)
        if cached is not None:
            return cached
        if self.down():  # answered by the policy; a probe tries Redis about once a second
            if self.outage.probe_due():
                background(self.probe(charges[0]))
            return self.unavailable(self.still_down(), charges)
        outcomes: list[Outcome] = []
        started = time.perf_counter()
        try:
            for group in self.groups(charges):
                outcomes.append(check_results(group, (yield Call(check_args(group), functools.partial(undo_args, group)))))
        except (transport.Unavailable, RedisError) as error:
            seconds = time.perf_counter() - started
            self.metrics.redis_call(seconds, error)
            yield from self.give_back(outcomes)  # a cluster's earlier calls took units: nothing stays charged
            if not isinstance(error, transport.Unavailable):
                raise
            self.failed(error)
            return self.unavailable(error, charges, seconds)
        seconds = time.perf_counter() - started
        self.metrics.redis_call(seconds, None)
        if not all(o[0] for o in outcomes):
            outcomes = yield from self.give_back(outcomes)
        return self.decided(outcomes, charges, seconds)

    def give_back(self, outcomes: list[Outcome]) -> Flow[list[Outcome]]:
        """Gives back what the calls that admitted took (on a cluster, when
        another call denied or failed): units refunded, leases released; a
        call that fails is logged, the outcome stands."""
        out = []
        for outcome in outcomes:
            if outcome[0]:
                try:
                    after = {}
                    for r in outcome[2]:
                        if taken_back(r):
                            after[r.key] = given_back(r, (yield Call(give_back_args(r))))
                    outcome = (True, 0, [after.get(r.key, r) for r in outcome[2]])
                except (transport.Unavailable, RedisError) as error:
                    log.warning("rate limiter: units taken for a denied request not given back: %s", error)
            out.append(outcome)
        return out

    def probe(self, charge: Charge) -> Flow[None]:
        """Is Redis back? An RL.PEEK (it takes nothing). The outage hears
        the answer whatever happens (finally): a probe that failed in an
        unexpected way, or whose thread or task ended early, must not
        leave the outage waiting for it forever."""
        answered = False
        try:
            yield Call(peek_args(charge))
            answered = True
        except RedisError:  # an error reply is an answer: Redis is back
            answered = True
        except transport.Unavailable:
            pass
        except Exception as error:  # e.g. a key that cannot be sent: no answer either
            log.warning("rate limiter: probe failed: %r", error)
        finally:
            self.outage.probed(answered)

    def peek(self, request: Any) -> Flow[Optional[Decision]]:
        charges = yield from self.charges(request)
        if self.down():
            return self.peek_unavailable(self.still_down(), charges)
        results = []
        try:
            for charge in charges:
                results.append(result(charge, (yield Call(peek_args(charge)))))
        except transport.Unavailable as error:
            self.failed(error)
            return self.peek_unavailable(error, charges)
        return self.peeked(results, charges)

    def refund(self, decision: Decision, units: Units) -> Flow[bool]:
        given = self.units(decision, units)
        if given and self.down():
            return False  # logged when the outage began
        try:
            for r, n in given:
                yield Call(refund_args(charge_of(r), n))
        except transport.Unavailable as error:
            self.failed(error)
            log.warning("rate limiter: refund not made, Redis unavailable: %s", error)
            return False
        return True

    def release(self, decision: Decision) -> Flow[None]:
        for held in self.to_release(decision):
            try:
                yield Call(release_args(held))
            except (transport.Unavailable, RedisError) as error:
                self.release_failed(error)

    def renew(self, decision: Decision) -> Flow[bool]:
        answered = self.renewed_without_redis(decision)
        if answered is not None:
            return answered
        replies = []
        try:
            for held in decision.leases:
                replies.append((yield Call(renew_args(held))))
        except transport.Unavailable as error:
            self.failed(error)
            raise RateLimiterUnavailable(str(error)) from error
        return all(int(reply[0]) == 1 for reply in replies)

    # The steps without Redis.

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
        return Charge(limit, name, f"{self.options.prefix}{{{partition}}}:{limit.key_name(size)}", units, size, partition)

    def groups(self, charges: list[Charge]) -> list[list[Charge]]:
        """One call for all; on a cluster one per partition key (the part
        of the Redis key in braces), since the keys of one call must share a slot."""
        if not self.cluster:
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

    def peeked(self, results: list[LimitResult], charges: list[Charge]) -> Decision:
        outcome = (all(r.allowed for r in results), 0, results)
        if not outcome[0]:
            waits = [r.retry_after_ms for r in results if not r.allowed]
            outcome = (False, -1 if -1 in waits else max(waits), results)
        return self.combine([outcome], charges)

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

    def renewed_without_redis(self, decision: Decision) -> Optional[bool]:
        """renew()'s answer when it needs no Redis call: False without a
        lease, in process for a decision made there; RateLimiterUnavailable
        at once while Redis is down. None: ask Redis."""
        if not decision.leases:
            return False
        if decision.local:
            assert self.local is not None
            now_us = time.time_ns() // 1000
            replies = [self.local.renew(held.key, cast(int, held.lease_id), micros(held.spec.parameter_text), now_us) for held in decision.leases]
            return all(reply[0] == 1 for reply in replies)
        if self.down():
            raise RateLimiterUnavailable(str(self.still_down()))
        return None

    def release_failed(self, error: Exception) -> None:
        """A lease not released stays held until it runs out: logged, never raised."""
        if isinstance(error, transport.Unavailable):
            self.failed(error)
        log.warning("rate limiter: lease not released, it runs out by itself: %s", error)

    def failed(self, error: transport.Unavailable) -> None:
        """Redis failed: the policy answers until a probe gets through (outage.py)."""
        if self.outage.failed(str(error)):
            log.warning("rate limiter: Redis unavailable, answering by on_unavailable=%r until it is back: %s", self.options.on_unavailable, error)

    def unavailable(self, error: Exception, charges: list[Charge], seconds: Optional[float] = None) -> Optional[Decision]:
        """The answer while Redis is unavailable, by each limit's policy:
        503 when one is "closed"; else the in-process limiter over the
        "local" ones (the "open" ones pass unchecked, left out of the
        decision); else a pass."""
        policies = self.options.policies
        if any(policies[c.name] == "closed" for c in charges):
            self.metrics.decided("unavailable_closed", None, seconds, error)
            raise RateLimiterUnavailable(str(error)) from error
        local = [c for c in charges if policies[c.name] == "local"]
        if not local:
            self.metrics.decided("unavailable_open", None, seconds, error)
            return None
        decision = self.local_decision(local)
        self.metrics.decided("unavailable_local_allowed" if decision.allowed else "unavailable_local_denied", decision, seconds, error)
        return decision

    def local_decision(self, charges: list[Charge]) -> Decision:
        """In process, each limit this instance's share (local.share)."""
        shares, specs = [], []
        for c in charges:
            size, parameter = share(c.spec.algorithm, c.limit, c.spec.parameter_text, self.options.instances)
            spec = dataclasses.replace(c.spec, rate=float(parameter)) if c.spec.is_bucket else c.spec  # for the headers' w and t
            shares.append(dataclasses.replace(c, spec=spec, limit=size))
            specs.append((c.spec.algorithm, size, parameter, c.cost))
        assert self.local is not None
        reply = self.local.multi([c.key for c in shares], time.time_ns() // 1000, specs)
        return dataclasses.replace(self.combine([multi_results(shares, reply)], shares), local=True)

    def peek_unavailable(self, error: Exception, charges: list[Charge]) -> Optional[Decision]:
        if any(self.options.policies[c.name] == "closed" for c in charges):
            raise RateLimiterUnavailable(str(error)) from error
        return None

    def still_down(self) -> transport.Unavailable:
        return transport.Unavailable(f"{self.outage.error} (Redis unavailable: tried again about once a second)")

    def down(self) -> bool:
        return self.outage.down


C = TypeVar("C", transport.SyncClient, transport.AsyncClient)
L = TypeVar("L", bound="_Limiter[Any]")


class _Limiter(Generic[C]):
    """What both limiters are made of: the client, checked, and the Core."""

    ASYNC = False

    def __init__(
        self,
        redis: C,
        limits: Union[Limit, Sequence[Limit]],
        *,
        key: Optional[KeyFunction] = None,
        prefix: str = "ratelimit:",
        timeout: float = 1.0,
        fail_open: Optional[bool] = None,
        on_unavailable: Optional[OnUnavailable] = None,
        instances: int = 1,
        mode: Mode = "auto",
        script_call: ScriptCall = "auto",
        denial_cache: int = 10_000,
        on_decision: Optional[OnDecision] = None,
    ) -> None:
        check = transport.check_async_client if self.ASYNC else transport.check_sync_client
        self.redis: C = cast(C, check(redis))
        options = Options(
            cast(Sequence[Limit], limits), key, prefix, timeout, fail_open, on_unavailable, instances, mode, script_call, denial_cache, on_decision, self.ASYNC
        )
        self.core = Core(options, transport.is_cluster(self.redis))

    def with_limits(self: L, *limits: Limit) -> L:
        """This limiter with more limits (a route's), checked in the same call."""
        return type(self)(self.redis, self.core.options.limits_and(limits), **self.core.options.keywords())


class RateLimiter(_Limiter[transport.SyncClient]):
    """For redis.Redis and redis.cluster.RedisCluster.

    `check(request)` returns the Decision (taking the units when allowed),
    None when Redis is unavailable and the limiter fails open, raises
    RateLimiterUnavailable when it fails closed, and passes the module's
    (or the script's) error replies on as redis.ResponseError (a server
    error, never a pass). `mode`: "auto", "module" or "script";
    `script_call`: "auto", "fcall" or "evalsha" (mode.py).
    """

    def _run(self, flow: Flow[T], step: Any = None) -> T:
        """Drives a flow (from `step` when it was started already): each
        call it yields made on Redis, its reply or its error sent back in."""
        try:
            if step is None:
                step = next(flow)
            while True:
                try:
                    reply = transport.call_sync(self.redis, step, self.core.options.timeout, self.core.options.calls)
                except BaseException as error:
                    step = flow.throw(error)
                else:
                    step = flow.send(reply)
        except StopIteration as done:
            return cast(T, done.value)

    def _background(self, flow: Flow[None]) -> None:
        """The probe, in a thread of its own (no request waits for it);
        started here, so its `finally` runs whatever happens to the thread."""
        step = next(flow)
        threading.Thread(target=self._run, args=(flow, step), name="redis-ratelimit-probe", daemon=True).start()

    def charges(self, request: Any) -> list[Charge]:
        return self._run(self.core.charges(request))

    def check(self, request: Any = None) -> Optional[Decision]:
        return self._run(self.core.check(request, self._background))

    def peek(self, request: Any = None) -> Optional[Decision]:
        """Would the request be admitted now? Takes nothing (RL.PEEK)."""
        return self._run(self.core.peek(request))

    def refund(self, decision: Decision, units: Units = None) -> bool:
        """Gives units back (RL.REFUND): each limit's cost by default, or
        units per policy name, e.g. {"tokens": unused} after reserving the
        most a request may use (the other limits keep theirs). False when
        Redis was unavailable (logged)."""
        return self._run(self.core.refund(decision, units))

    def release(self, decision: Decision) -> None:
        """Frees the leases of the decision's concurrency limits
        (RL.RELEASE, one call per lease), the first time it is called for
        the decision; later calls, and a decision without leases, do
        nothing. Never raises for Redis: a lease not released is logged
        and runs out by itself."""
        self._run(self.core.release(decision))

    def renew(self, decision: Decision) -> bool:
        """Makes each lease the decision holds run its limit's `lease`
        from now (RL.RENEW, one call per lease), for work that outlasts it.
        True when every one was still held; False when one had run out or
        been released, or the decision holds none. Raises
        RateLimiterUnavailable when Redis cannot answer, so the work can
        stop; an error reply as it came."""
        return self._run(self.core.renew(decision))


class AsyncRateLimiter(_Limiter[transport.AsyncClient]):
    """As RateLimiter, for redis.asyncio.Redis and redis.asyncio.cluster.RedisCluster;
    key and cost functions may be async."""

    ASYNC = True

    @functools.cached_property
    def _deadlines(self) -> Deadlines:
        return Deadlines(self.core.options.timeout)

    @functools.cached_property
    def _probes(self) -> set[asyncio.Future[None]]:
        return set()

    async def _run(self, flow: Flow[T], step: Any = None) -> T:
        """As RateLimiter._run, awaiting each call (and each Await)."""
        try:
            if step is None:
                step = next(flow)
            while True:
                try:
                    if type(step) is Await:
                        reply = await cast(Awaitable[Any], step.value)
                    else:
                        reply = await transport.call_async(self.redis, step, self._deadlines, self.core.options.calls)
                except BaseException as error:
                    step = flow.throw(error)
                else:
                    step = flow.send(reply)
        except StopIteration as done:
            return cast(T, done.value)

    def _background(self, flow: Flow[None]) -> None:
        """The probe, in a task of its own; started here and closed when the
        task ends, so its `finally` runs even when the task is cancelled
        before it runs (a loop closed by asyncio.run)."""
        step = next(flow)
        task = asyncio.ensure_future(self._run(flow, step))
        self._probes.add(task)  # a reference, or the loop may drop the task
        task.add_done_callback(self._probes.discard)
        task.add_done_callback(lambda _: flow.close())

    async def charges(self, request: Any) -> list[Charge]:
        return await self._run(self.core.charges(request))

    async def check(self, request: Any = None) -> Optional[Decision]:
        return await self._run(self.core.check(request, self._background))

    async def peek(self, request: Any = None) -> Optional[Decision]:
        """As RateLimiter.peek."""
        return await self._run(self.core.peek(request))

    async def refund(self, decision: Decision, units: Units = None) -> bool:
        """As RateLimiter.refund."""
        return await self._run(self.core.refund(decision, units))

    async def release(self, decision: Decision) -> None:
        """As RateLimiter.release."""
        await self._run(self.core.release(decision))

    async def renew(self, decision: Decision) -> bool:
        """As RateLimiter.renew."""
        return await self._run(self.core.renew(decision))
