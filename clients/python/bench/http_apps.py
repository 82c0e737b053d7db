"""The FastAPI apps `make bench-http` serves side by side, one route each:
BENCH_APP = none (no limiter), ours (this package's dependency, module
mode), ours-script (the same in script mode: the Lua library through
FCALL), slowapi;
BENCH_PATH = admitted (a limit never reached) or denied (a limit of 1,
reached by the first request). Redis at REDIS_URL."""

from __future__ import annotations

import os
from typing import Any

from fastapi import Depends, FastAPI, Request

APP = os.environ["BENCH_APP"]
DENIED = os.environ["BENCH_PATH"] == "denied"
REDIS_URL = os.environ["REDIS_URL"]

app = FastAPI()

if APP == "none":

    @app.get("/x")
    async def plain() -> dict[str, bool]:
        return {"ok": True}

elif APP in ("ours", "ours-script"):
    from redis.asyncio import Redis

    from redis_ratelimit_client import AsyncRateLimiter, Limit
    from redis_ratelimit_client.fastapi import RateLimit, RateLimitExceeded, RateLimitHeadersMiddleware, rate_limit_exceeded_handler

    limit = Limit("fixedwindow", 1, window=1_000_000) if DENIED else Limit("tokenbucket", 10**12, rate=10**9)
    # Script mode's state is not the module's type: its own prefix, on the Redis the module's app shares.
    script: dict[str, Any] = {"mode": "script", "script_call": "fcall", "prefix": "ratelimit-script:"} if APP == "ours-script" else {}
    ours = RateLimit(AsyncRateLimiter(Redis.from_url(REDIS_URL), limit, **script))
    app.add_middleware(RateLimitHeadersMiddleware)
    app.add_exception_handler(RateLimitExceeded, rate_limit_exceeded_handler)

    @app.get("/x", dependencies=[Depends(ours)])
    async def limited() -> dict[str, bool]:
        return {"ok": True}

elif APP == "slowapi":
    from slowapi import Limiter, _rate_limit_exceeded_handler
    from slowapi.errors import RateLimitExceeded as SlowapiExceeded
    from slowapi.util import get_remote_address

    slow = Limiter(key_func=get_remote_address, storage_uri=REDIS_URL)
    app.state.limiter = slow
    app.add_exception_handler(SlowapiExceeded, _rate_limit_exceeded_handler)  # type: ignore[arg-type]

    @app.get("/x")
    @slow.limit("1/day" if DENIED else "1000000000/hour")
    async def slowapi_limited(request: Request) -> dict[str, bool]:
        return {"ok": True}

else:
    raise SystemExit(f"BENCH_APP: none, ours, ours-script or slowapi (got {APP!r})")
