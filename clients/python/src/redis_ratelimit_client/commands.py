"""The module's commands as argument lists, and their replies as results."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from .decision import LimitResult
from .limits import Limit


@dataclass(frozen=True)
class Charge:
    """One limit applied to one request: its Redis key and its cost."""

    spec: Limit
    name: str
    key: str
    cost: int
    limit: int  # the spec's, or what its function gave for this request
    partition: str = ""  # the key function's answer: limits sharing it share a slot

    def spec_args(self) -> list[str]:
        return [self.spec.algorithm.upper(), str(self.limit), self.spec.parameter_text]


#: The calls that give back what a call took, from its reply.
Undo = Callable[[Any], list[list[str]]]


@dataclass(frozen=True)
class Call:
    """A module call a flow needs made. `undo`, for a call that takes (a
    check_args call): the calls that give back what its reply says it took, made
    when that reply comes after the limiter stopped waiting (transport.py)."""

    args: list[str]
    undo: Optional[Undo] = None


def multi_args(charges: Sequence[Charge]) -> list[str]:
    """RL.MULTI numkeys key... now ALGORITHM a b n ...; `now` is the server's clock."""
    args = ["RL.MULTI", str(len(charges)), *(c.key for c in charges), "*"]
    for charge in charges:
        args += [*charge.spec_args(), str(charge.cost)]
    return args


def check_args(charges: Sequence[Charge]) -> list[str]:
    """The call that takes the charges: one limit's own command (RL.ACQUIRE
    for a concurrency limit; cheaper for Redis than RL.MULTI of one key),
    RL.MULTI for several. check_results reads its reply."""
    if len(charges) > 1:
        return multi_args(charges)
    (c,) = charges
    command = "RL.ACQUIRE" if c.spec.is_concurrency else f"RL.{c.spec.algorithm.upper()}"
    return [command, c.key, str(c.limit), c.spec.parameter_text, "*", str(c.cost)]


def check_results(charges: Sequence[Charge], reply: Sequence[Any]) -> tuple[bool, int, list[LimitResult]]:
    """check_args's reply as multi_results reads it: one limit's fields f are
    what RL.MULTI of that limit answers as [f[0], 0 or f[3], f]."""
    if len(charges) == 1:
        reply = [reply[0], 0 if int(reply[0]) == 1 else reply[3], reply]
    return multi_results(charges, reply)


def peek_args(charge: Charge) -> list[str]:
    return ["RL.PEEK", charge.key, *charge.spec_args(), "*", str(charge.cost)]


def refund_args(charge: Charge, units: int) -> list[str]:
    return ["RL.REFUND", charge.key, *charge.spec_args(), "*", str(units)]


def release_args(held: LimitResult) -> list[str]:
    return ["RL.RELEASE", held.key, str(held.lease_id), "*"]


def renew_args(held: LimitResult) -> list[str]:
    """RL.RENEW key lease_id lease now: the lease runs the limit's `lease` from now."""
    return ["RL.RENEW", held.key, str(held.lease_id), held.spec.parameter_text, "*"]


def charge_of(r: LimitResult) -> Charge:
    return Charge(r.spec, r.name, r.key, r.cost, r.limit)


def taken_back(r: LimitResult) -> bool:
    """Whether giving back what a request took has a call to make for this
    limit: a lease to release, or units to refund."""
    return bool(r.lease_id) or (r.cost > 0 and not r.spec.is_concurrency)


def give_back_args(r: LimitResult) -> list[str]:
    return release_args(r) if r.lease_id else refund_args(charge_of(r), r.cost)


def given_back(r: LimitResult, reply: Sequence[Any]) -> LimitResult:
    """The limit's state after give_back_args's call: RL.REFUND's fields,
    or RL.RELEASE's [released, held, reset_after_ms] (the lease gone)."""
    if not r.lease_id:
        return result(charge_of(r), reply)
    held, reset_after_ms = int(reply[1]), int(reply[2])
    return dataclasses.replace(r, remaining=max(0, r.limit - held), reset_after_ms=reset_after_ms, lease_id=0)


def result(charge: Charge, fields: Sequence[Any]) -> LimitResult:
    """A limit's reply fields, [allowed, remaining, limit, retry_after_ms,
    reset_after_ms (, delay_ms or lease_id)], named. A concurrency limit
    that denies waits its `retry_after` hint, or the module's figure when
    that is shorter (when enough leases run out: a release frees a slot
    much sooner); never (-1) stays never."""
    numbers = [int(x) for x in fields]
    sixth = numbers[5] if len(numbers) > 5 else None
    if charge.spec.is_concurrency and numbers[3] > 0:
        numbers[3] = min(numbers[3], charge.spec.retry_after_ms)
    return LimitResult(
        name=charge.name,
        key=charge.key,
        algorithm=charge.spec.algorithm,
        allowed=numbers[0] == 1,
        remaining=numbers[1],
        limit=numbers[2],
        retry_after_ms=numbers[3],
        reset_after_ms=numbers[4],
        delay_ms=None if charge.spec.is_concurrency else sixth,
        cost=charge.cost,
        spec=charge.spec,
        lease_id=sixth if charge.spec.is_concurrency else None,
    )


def multi_results(charges: Sequence[Charge], reply: Sequence[Any]) -> tuple[bool, int, list[LimitResult]]:
    """RL.MULTI's reply: [allowed, retry_after_ms, [fields of limit 1], ...];
    a denial's wait is its denying limits' largest (as the module's, with
    a concurrency limit's hint in it), -1 when one can never admit."""
    results = [result(c, f) for c, f in zip(charges, reply[2:])]
    if int(reply[0]) == 1:
        return True, 0, results
    waits = [r.retry_after_ms for r in results if not r.allowed]
    return False, (-1 if -1 in waits else max(waits, default=int(reply[1]))), results


def undo_args(charges: Sequence[Charge], reply: Sequence[Any]) -> list[list[str]]:
    """What gives back all a check_args call took, from its reply: nothing for a
    denial; RL.REFUND of each limit's cost, RL.RELEASE of each lease taken."""
    allowed, _, results = check_results(charges, reply)
    return [give_back_args(r) for r in results if taken_back(r)] if allowed else []
