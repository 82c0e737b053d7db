"""The Flask extension and its per-view decorator, served by Werkzeug over real HTTP."""

from __future__ import annotations

import time

import redis
from flask import Flask, g

from redis_ratelimit_client import Limit, RateLimiter, by_ip
from redis_ratelimit_client.flask import FlaskRateLimit
from servers import Server
from web import check_scenario, get, rate_headers, serve_wsgi

LIMIT = Limit("tokenbucket", 2, rate=0.001)


def flask_app(server: Server, fail_open: bool) -> Flask:
    app = Flask(__name__)
    limiter = RateLimiter(redis.Redis(port=server.port), LIMIT, key=by_ip(trusted_proxies=1), fail_open=fail_open)
    rate_limit = FlaskRateLimit(app, limiter, skip_failed_requests=True)
    route_limiter = RateLimiter(
        redis.Redis(port=server.port),
        [Limit("fixedwindow", 1, window=1_000_000, name="search")],
        key=by_ip(trusted_proxies=1),
        fail_open=fail_open,
    )

    @app.get("/ok")
    def ok() -> str:
        assert g.rate_limit is not None or fail_open
        return "ok"

    @app.get("/fail")
    def fail() -> tuple[str, int]:
        return "bad", 400

    @app.get("/free")
    @rate_limit.exempt
    def free() -> str:
        return "ok"

    @app.get("/search")
    @rate_limit.limit(route_limiter)
    def search() -> str:
        return "found"

    return app


def test_flask_extension_and_decorator(own_server: Server) -> None:
    with serve_wsgi(flask_app(own_server, True)) as open_port, serve_wsgi(flask_app(own_server, False)) as closed_port:
        status, headers, body = get(open_port, "/search", "192.0.2.1")
        assert (status, body, headers["ratelimit-policy"]) == (200, "found", '"search";q=1;w=1000000')
        status, headers, body = get(open_port, "/search", "192.0.2.1")
        assert (status, body["error"], headers["ratelimit"]) == (429, "rate_limit_exceeded", '"search";r=0;t=' + headers["retry-after"])
        check_scenario(open_port, closed_port, own_server)


def test_flask_handler_replaces_the_denial(own_server: Server) -> None:
    app = Flask(__name__)
    limiter = RateLimiter(redis.Redis(port=own_server.port), LIMIT, key=by_ip(trusted_proxies=1))
    FlaskRateLimit(
        app, limiter,
        handler=lambda request, decision: ({"wait_ms_positive": decision.retry_after_ms > 0, "path": request.path}, 429),
        skip=lambda request: request.path == "/health",
    )

    @app.get("/ok")
    def ok() -> str:
        return "ok"

    @app.get("/health")
    def health() -> str:
        return "fine"

    with serve_wsgi(app) as port:
        for _ in range(3):
            status, headers, body = get(port, "/health", "192.0.2.9")
            assert (status, body, rate_headers(headers)) == (200, "fine", {})
        assert [get(port, "/ok", "192.0.2.9")[0] for _ in range(2)] == [200, 200]
        status, headers, body = get(port, "/ok", "192.0.2.9")
        assert (status, body) == (429, {"path": "/ok", "wait_ms_positive": True})


def test_flask_throttle_paces_a_leaky_bucket(own_server: Server) -> None:
    app = Flask(__name__)
    limiter = RateLimiter(redis.Redis(port=own_server.port), Limit("leakybucket", 3, rate=5), key=by_ip(trusted_proxies=1))
    FlaskRateLimit(app, limiter, throttle=True)

    @app.get("/work")
    def work() -> str:
        return "done"

    with serve_wsgi(app) as port:
        times = []
        for _ in range(2):
            started = time.monotonic()
            status, headers, body = get(port, "/work", "192.0.2.10")
            times.append(time.monotonic() - started)
            assert (status, body, headers["ratelimit-policy"]) == (200, "done", '"default";q=3;w=1')
        # The second request waited its place in the queue (1/rate = 200 ms) before running.
        assert times[0] < 0.15 and times[1] >= 0.19, times
