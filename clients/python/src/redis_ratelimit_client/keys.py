"""Whom a request counts against: its client address or its signed-in
user. The key functions read the request of any integration here (ASGI
scope, Starlette/FastAPI/Litestar Request, Flask/Werkzeug Request, Django
HttpRequest), so every framework keys the same way."""

from __future__ import annotations

import ipaddress
from typing import Any, Callable, Optional, Union

from .limits import ConfigurationError

Ipv6Subnet = Union[int, bool]


def ip_key(address: str, ipv6_subnet: Ipv6Subnet = 56) -> str:
    """`ip:203.0.113.7`; IPv4-mapped IPv6 counts as IPv4; other IPv6
    addresses are grouped by their first `ipv6_subnet` bits (a customer
    usually gets a whole /56 and could rotate through it), or kept whole
    with False."""
    try:
        parsed = ipaddress.ip_address(address.strip())
    except ValueError:
        return f"ip:{address}"
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    if isinstance(parsed, ipaddress.IPv4Address):
        return f"ip:{parsed}"
    if ipv6_subnet is False:
        return f"ip6:{parsed}"
    network = ipaddress.IPv6Network((parsed, int(ipv6_subnet)), strict=False)
    return f"ip6:{network}"


def _check_subnet(ipv6_subnet: object) -> Ipv6Subnet:
    if ipv6_subnet is False or (type(ipv6_subnet) is int and 1 <= ipv6_subnet <= 128):
        return ipv6_subnet
    raise ConfigurationError(f"ipv6_subnet: must be an integer from 1 to 128, or False (got {ipv6_subnet!r})")


def _header(request: Any, name: str) -> Optional[str]:
    """A request header, whatever the framework."""
    if isinstance(request, dict):  # an ASGI scope
        wanted = name.lower().encode("latin-1")
        for key, value in request.get("headers", []):
            if key.lower() == wanted:
                return str(value.decode("latin-1"))
        return None
    meta = getattr(request, "META", None)
    if isinstance(meta, dict):  # Django
        value = meta.get("HTTP_" + name.upper().replace("-", "_"))
        return None if value is None else str(value)
    headers = getattr(request, "headers", None)
    if headers is not None:
        value = headers.get(name)
        return None if value is None else str(value)
    return None


def peer_address(request: Any) -> Optional[str]:
    """The address of the connection's peer, as the framework or server
    gives it (uvicorn's --forwarded-allow-ips and Werkzeug's ProxyFix have
    applied X-Forwarded-For already, when the app configured them); None
    when it gives none (a Unix socket, no request at all)."""
    if isinstance(request, dict):  # an ASGI scope
        client = request.get("client")
        return str(client[0]) if client and client[0] else None
    meta = getattr(request, "META", None)
    if isinstance(meta, dict):  # Django
        return str(meta["REMOTE_ADDR"]) if meta.get("REMOTE_ADDR") else None
    remote_addr = getattr(request, "remote_addr", None)  # Flask / Werkzeug
    if isinstance(remote_addr, str):
        return remote_addr or None
    client = getattr(request, "client", None)  # Starlette, FastAPI, Litestar
    host = getattr(client, "host", None)
    return str(host) if host else None


class by_ip:
    """Keys by client address. `trusted_proxies=N` (0 by default: no proxy
    is trusted) takes the address the N-th proxy from us saw, from the
    right end of X-Forwarded-For; only set it when exactly N proxies you
    run stand before the app, or clients could choose their own key."""

    def __init__(self, *, ipv6_subnet: Ipv6Subnet = 56, trusted_proxies: int = 0) -> None:
        self.ipv6_subnet = _check_subnet(ipv6_subnet)
        if type(trusted_proxies) is not int or trusted_proxies < 0:
            raise ConfigurationError(f"trusted_proxies: must be an integer >= 0 (got {trusted_proxies!r})")
        self.trusted_proxies = trusted_proxies

    def address(self, request: Any) -> str:
        """The client's address; a ValueError when the request has none,
        since keying such requests alike would give all callers one budget."""
        address = peer_address(request)
        if self.trusted_proxies:
            forwarded = [a.strip() for a in (_header(request, "X-Forwarded-For") or "").split(",") if a.strip()]
            if len(forwarded) >= self.trusted_proxies:
                address = forwarded[-self.trusted_proxies]
        if address is None and request is None:
            raise ValueError("by_ip: no request to key by (check() was called without one): pass the request, or give the limiter a key function")
        if address is None:
            raise ValueError("by_ip: the request carries no client address: give the limiter a key function that names the caller")
        return address

    def __call__(self, request: Any) -> str:
        return ip_key(self.address(request), self.ipv6_subnet)


def _signed_in_user(request: Any) -> Any:
    if isinstance(request, dict):  # an ASGI scope, after an auth middleware
        return request.get("user")
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):  # Starlette, FastAPI, Litestar: scope["user"]
        return scope.get("user")
    return getattr(request, "user", None)  # Django's request.user


def _user_id(user: Any) -> Optional[str]:
    if user is None or getattr(user, "is_authenticated", True) is False:
        return None
    if isinstance(user, (str, int)):
        return str(user)
    for attribute in ("id", "pk", "identity"):
        try:
            value = getattr(user, attribute, None)
        except NotImplementedError:  # Starlette's BaseUser.identity, where a subclass left it out
            continue
        if value is not None and value != "":
            return str(value)
    return None


class by_user:
    """Keys by the authenticated user (`user:<id>`: Django's request.user,
    the ASGI scope's "user" as Starlette's and Litestar's auth set it, or
    what `get(request)` returns, e.g. Flask-Login's current_user), and by
    address (`ip`) for anonymous requests."""

    def __init__(self, get: Optional[Callable[[Any], Any]] = None, *, ip: Optional[by_ip] = None) -> None:
        if get is not None and not callable(get):
            raise ConfigurationError(f"get: must be a function of the request (got {get!r})")
        self.get = get
        self.ip = ip or by_ip()

    def __call__(self, request: Any) -> str:
        user = self.get(request) if self.get else _signed_in_user(request)
        identity = _user_id(user)
        return self.ip(request) if identity is None else f"user:{identity}"
