"""A limiter's options, each checked when the limiter is made: a typo or a
bad number raises ConfigurationError naming the option, never disables
limiting. Shared by the sync and the asyncio limiter."""

from __future__ import annotations

import inspect
from typing import Any, Optional, Sequence, cast

from .keys import by_ip
from .limits import ConfigurationError, KeyFunction, Limit
from .metrics import OnDecision
from .mode import Calls, Mode
from .outage import POLICIES, OnUnavailable
from .script import ScriptCall


class Options:
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
        script_call: ScriptCall,
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
        #: Each limit's own policy (by name): its on_unavailable, else the
        #: limiter's; a concurrency limit's "local" (never unbounded load).
        self.policies: dict[str, OnUnavailable] = {
            name: limit.on_unavailable or ("local" if limit.is_concurrency else self.on_unavailable) for limit, name in self.limits
        }
        if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
            raise ConfigurationError(f"instances: must be an integer >= 1, the processes sharing the limits (got {instances!r})")
        self.instances = instances
        self.calls = Calls(mode, script_call)
        if isinstance(denial_cache, bool) or not isinstance(denial_cache, int) or denial_cache < 0:
            raise ConfigurationError(f"denial_cache: must be an integer >= 0, the most denials kept (0: off) (got {denial_cache!r})")
        self.denial_cache = denial_cache
        if on_decision is not None and not callable(on_decision):
            raise ConfigurationError(f"on_decision: must be a function of a DecisionEvent (got {on_decision!r})")
        self.on_decision = on_decision
        self.allow_async = allow_async

    @property
    def mode(self) -> Mode:
        return self.calls.mode

    @property
    def names(self) -> list[str]:
        return [name for _, name in self.limits]

    def limits_and(self, more: Sequence[Limit]) -> list[Limit]:
        """These limits, then `more` (with_limits)."""
        return [*(limit for limit, _ in self.limits), *more]

    def keywords(self) -> dict[str, Any]:
        """The keyword options this limiter was made with, as checked (with_limits)."""
        return {
            "key": self.key, "prefix": self.prefix, "timeout": self.timeout, "on_unavailable": self.on_unavailable, "instances": self.instances,
            "mode": self.mode, "script_call": self.calls.script_call, "denial_cache": self.denial_cache, "on_decision": self.on_decision,
        }
