"""The Flask extension and its per-view decorator, served by Werkzeug over real HTTP."""

from __future__ import annotations

import threading
import time
from typing import Iterator

import redis
from flask import Flask, Response, g

from redis_ratelimit_client import Limit, RateLimiter, by_ip
from redis_ratelimit_client.flask import FlaskRateLimit
from servers import Server
from modes import run
from web import ABORT_SLOTS, HEADER_CHOICES, HEADERS_LIMIT, SLOTS, WORK, Running, check_aborting_clients, check_concurrency_scenario, check_headers_scenario
from web import check_scenario, check_streamed_slot, get, rate_headers, serve_wsgi, wait_for

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
        # The second request waited its place in the queue before running: 1/rate = 200 ms after the first was admitted.
        assert times[0] < 0.15 and times[0] + times[1] >= 0.19, times


def test_flask_concurrency_limit(server: Server, r: redis.Redis, mode: str) -> None:
    gate = threading.Event()
    app = Flask(__name__)
    FlaskRateLimit(app, RateLimiter(redis.Redis(port=server.port), SLOTS, key=by_ip(trusted_proxies=1)))

    @app.get("/ok")
    def ok() -> str:
        return "ok"

    @app.get("/slow")
    def slow() -> str:
        gate.wait(10)
        return "slow"

    @app.get("/boom")
    def boom() -> str:
        raise RuntimeError("the handler failed")

    with serve_wsgi(app) as port:
        check_concurrency_scenario(port, r, mode, gate)
    app.config["PROPAGATE_EXCEPTIONS"] = True  # the error passes Flask's handling by: the teardown releases
    with serve_wsgi(app) as port:
        assert [get(port, "/boom", "203.0.113.16")[0] for _ in range(3)] == [500, 500, 500]
        assert int(run(r, mode, "RL.PEEK", "ratelimit:{ip:203.0.113.16}:slots", "CONCURRENCY", "2", "30", "*", "0")[1]) == 2


def test_flask_streamed_response_holds_its_slot_until_sent(server: Server, r: redis.Redis, mode: str) -> None:
    gate = threading.Event()
    app = Flask(__name__)
    FlaskRateLimit(app, RateLimiter(redis.Redis(port=server.port), SLOTS, key=by_ip(trusted_proxies=1)))

    @app.get("/stream")
    def stream() -> Response:
        def chunks() -> Iterator[str]:
            yield "first "
            gate.wait(10)
            yield "last"

        return Response(chunks(), mimetype="text/plain")

    with serve_wsgi(app) as port:
        check_streamed_slot(port, r, mode, gate)


def test_each_headers_choice(module_server: Server) -> None:
    with module_server.client() as admin:
        admin.flushall()
    for i, choice in enumerate(HEADER_CHOICES):
        app = Flask(__name__)
        FlaskRateLimit(app, RateLimiter(redis.Redis(port=module_server.port), HEADERS_LIMIT, key=by_ip(trusted_proxies=1)), headers=choice)

        @app.get("/ok")
        def ok() -> str:
            return "ok"

        with serve_wsgi(app) as port:
            check_headers_scenario(port, choice, f"198.51.100.{i}")


def test_clients_that_abort_never_free_a_slot_while_its_handler_runs(server: Server, r: redis.Redis, mode: str) -> None:
    running = Running()
    app = Flask(__name__)
    FlaskRateLimit(app, RateLimiter(redis.Redis(port=server.port), ABORT_SLOTS, key=by_ip(trusted_proxies=1)))

    @app.get("/work")
    def work() -> str:
        with running:
            time.sleep(WORK)
        return "done"

    with serve_wsgi(app) as port:
        check_aborting_clients(port, running)
        wait_for(lambda: int(run(r, mode, "RL.PEEK", "ratelimit:{ip:203.0.113.99}:slots", "CONCURRENCY", "3", "30", "*", "0")[1]) == 3)
