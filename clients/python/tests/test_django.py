"""The Django middleware and its per-view decorator, served by Werkzeug's
WSGI server over real HTTP."""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator

import django
import redis
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.test.utils import override_settings
from django.urls import path

from redis_ratelimit_client import Limit, RateLimiter, by_ip
from redis_ratelimit_client.django import rate_limit
from servers import Server
from modes import run
from web import ABORT_SLOTS, HEADER_CHOICES, HEADERS_LIMIT, SLOTS, WORK, Running, check_aborting_clients, check_concurrency_scenario, check_headers_scenario
from web import check_scenario, check_streamed_slot, get, serve_asgi, serve_wsgi, wait_for

settings.configure(
    DEBUG=False,
    ALLOWED_HOSTS=["127.0.0.1"],
    ROOT_URLCONF=__name__,
    SECRET_KEY="only-for-these-tests",
    MIDDLEWARE=["redis_ratelimit_client.django.RateLimitMiddleware"],
    RATE_LIMIT={},
)
django.setup()
urlpatterns: list[Any] = []
LIMIT = Limit("tokenbucket", 2, rate=0.001)


def text(body: str, status: int = 200) -> HttpResponse:
    return HttpResponse(body, status=status, content_type="text/plain")


def routes(server: Server) -> list[Any]:
    search_limiter = RateLimiter(
        redis.Redis(port=server.port), Limit("fixedwindow", 1, window=1_000_000, name="search"), key=by_ip(trusted_proxies=1)
    )

    def ok(request: HttpRequest) -> HttpResponse:
        return text("ok")

    def fail(request: HttpRequest) -> HttpResponse:
        return text("bad", 400)

    @rate_limit(None)
    def free(request: HttpRequest) -> HttpResponse:
        return text("ok")

    @rate_limit(search_limiter)
    def search(request: HttpRequest) -> HttpResponse:
        return text("found")

    return [path("ok", ok), path("fail", fail), path("free", free), path("search", search)]


def handler(server: Server, fail_open: bool) -> WSGIHandler:
    limiter = RateLimiter(redis.Redis(port=server.port), LIMIT, key=by_ip(trusted_proxies=1), fail_open=fail_open)
    with override_settings(RATE_LIMIT={"limiter": limiter, "skip_failed_requests": True}):
        return WSGIHandler()


def test_django_middleware_and_decorator(own_server: Server) -> None:
    urlpatterns[:] = routes(own_server)
    with serve_wsgi(handler(own_server, True)) as open_port, serve_wsgi(handler(own_server, False)) as closed_port:
        status, headers, body = get(open_port, "/search", "192.0.2.1")
        assert (status, body, headers["ratelimit-policy"]) == (200, "found", '"search";q=1;w=1000000')
        status, headers, body = get(open_port, "/search", "192.0.2.1")
        assert (status, body["error"], headers["ratelimit"]) == (429, "rate_limit_exceeded", '"search";r=0;t=' + headers["retry-after"])
        check_scenario(open_port, closed_port, own_server)


def test_django_decorator_without_the_middleware(own_server: Server) -> None:
    urlpatterns[:] = routes(own_server)
    with override_settings(MIDDLEWARE=[]):
        bare = WSGIHandler()
    with serve_wsgi(bare) as port:
        assert get(port, "/ok", "192.0.2.7")[0] == 200  # no middleware: only decorated views are limited
        status, headers, body = get(port, "/search", "192.0.2.7")
        assert (status, body, headers["ratelimit"]) == (200, "found", '"search";r=0;t=' + headers["ratelimit"].rsplit("=", 1)[1])
        status, headers, body = get(port, "/search", "192.0.2.7")
        assert (status, body["error"], headers["retry-after"]) == (429, "rate_limit_exceeded", headers["ratelimit"].rsplit("=", 1)[1])


def concurrency_routes(limiter: RateLimiter, gate: threading.Event) -> list[Any]:
    def ok(request: HttpRequest) -> HttpResponse:
        return text("ok")

    def slow(request: HttpRequest) -> HttpResponse:
        gate.wait(10)
        return text("slow")

    def boom(request: HttpRequest) -> HttpResponse:
        raise RuntimeError("the handler failed")

    def stream(request: HttpRequest) -> StreamingHttpResponse:
        def chunks() -> Iterator[str]:
            yield "first "
            gate.wait(10)
            yield "last"

        return StreamingHttpResponse(chunks(), content_type="text/plain")

    @rate_limit(limiter)
    def boom_decorated(request: HttpRequest) -> HttpResponse:
        raise RuntimeError("the handler failed")

    views = [path("ok", ok), path("slow", slow), path("boom", boom), path("stream", stream), path("boom-decorated", boom_decorated)]
    return views


def test_django_concurrency_limit(server: Server, r: redis.Redis, mode: str) -> None:
    gate = threading.Event()
    limiter = RateLimiter(redis.Redis(port=server.port), SLOTS, key=by_ip(trusted_proxies=1))
    urlpatterns[:] = concurrency_routes(limiter, gate)
    with override_settings(RATE_LIMIT={"limiter": limiter}):
        app = WSGIHandler()
    with serve_wsgi(app) as port:
        check_concurrency_scenario(port, r, mode, gate)
        check_streamed_slot(port, r, mode, gate)
    with override_settings(MIDDLEWARE=[]):
        bare = WSGIHandler()
    with serve_wsgi(bare) as port:  # the decorator alone, its view raising
        assert [get(port, "/boom-decorated", "203.0.113.16")[0] for _ in range(3)] == [500, 500, 500]
        assert int(run(r, mode, "RL.PEEK", "ratelimit:{ip:203.0.113.16}:slots", "CONCURRENCY", "2", "30", "*", "0")[1]) == 2


def test_each_headers_choice(module_server: Server) -> None:
    with module_server.client() as admin:
        admin.flushall()
    urlpatterns[:] = [path("ok", lambda request: text("ok"))]
    for i, choice in enumerate(HEADER_CHOICES):
        limiter = RateLimiter(redis.Redis(port=module_server.port), HEADERS_LIMIT, key=by_ip(trusted_proxies=1))
        with override_settings(RATE_LIMIT={"limiter": limiter, "headers": choice}):
            app = WSGIHandler()
        with serve_wsgi(app) as port:
            check_headers_scenario(port, choice, f"198.51.100.{i}")


def test_clients_that_abort_never_free_a_slot_while_its_handler_runs(server: Server, r: redis.Redis, mode: str) -> None:
    """Under WSGI (Werkzeug's server) and under ASGI (uvicorn, Django's
    ASGIHandler, which cancels a request's task when its client goes away:
    the sync middleware and view run on in their thread, the slot held)."""
    running = Running()

    def work(request: HttpRequest) -> HttpResponse:
        with running:
            time.sleep(WORK)
        return text("done")

    urlpatterns[:] = [path("work", work)]
    limiter = RateLimiter(redis.Redis(port=server.port), ABORT_SLOTS, key=by_ip(trusted_proxies=1))
    with override_settings(RATE_LIMIT={"limiter": limiter}):
        wsgi, asgi = WSGIHandler(), ASGIHandler()
    for serve, app in ((serve_wsgi, wsgi), (serve_asgi, asgi)):
        running.__init__()  # type: ignore[misc]
        with serve(app) as port:
            check_aborting_clients(port, running)
            wait_for(lambda: int(run(r, mode, "RL.PEEK", "ratelimit:{ip:203.0.113.99}:slots", "CONCURRENCY", "3", "30", "*", "0")[1]) == 3)
