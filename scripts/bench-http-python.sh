#!/bin/sh
# make bench-http, Python part: FastAPI with no limiter, with this package's
# dependency and with slowapi, side by side on one redis-server with the
# module (clients/python/bench/http_bench.py): requests/s, p50 and p99
# latency, CPU per request; the table goes into clients/python/README.md.
# Its own venv (.venv-bench-http) holds slowapi.
# Holds the lock BENCH_LOCK (a file) so two benchmarks never run at once.
set -eu
cd "$(dirname "$0")/../clients/python"
python3 -m venv .venv-bench-http
.venv-bench-http/bin/pip install -q -r requirements.lock slowapi==0.1.10
exec flock "${BENCH_LOCK:-/tmp/redis-ratelimit-bench.lock}" .venv-bench-http/bin/python bench/http_bench.py --readme README.md "$@"
