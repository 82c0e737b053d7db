#!/bin/sh
# make bench-http, Python part: FastAPI with no limiter, with this package's
# dependency (module mode, and script mode: the Lua library through FCALL)
# and with slowapi, side by side on one redis-server with the module
# (clients/python/bench/http_bench.py): requests/s, app and Redis CPU per
# request, p50 and p99 latency; the table goes into clients/python/README.md
# (or $README). ROUNDS, SECONDS_PER_RUN and CONNECTIONS size it (else the
# script's defaults); arguments go on to http_bench.py.
# Its own venv (.venv-bench-http) holds slowapi.
# Holds the lock BENCH_LOCK (a file) so two benchmarks never run at once.
set -eu
readme=$(realpath "${README:-$(dirname "$0")/../clients/python/README.md}")
cd "$(dirname "$0")/../clients/python"
python3 -m venv .venv-bench-http
.venv-bench-http/bin/pip install -q -r requirements.lock slowapi==0.1.10 limits==5.8.0
exec flock "${BENCH_LOCK:-/tmp/redis-ratelimit-bench.lock}" .venv-bench-http/bin/python bench/http_bench.py --readme "$readme" \
  ${ROUNDS:+--rounds "$ROUNDS"} ${SECONDS_PER_RUN:+--seconds "$SECONDS_PER_RUN"} ${CONNECTIONS:+--connections "$CONNECTIONS"} "$@"
