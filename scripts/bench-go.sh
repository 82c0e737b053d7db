#!/usr/bin/env bash
# make bench-go: a net/http server limiting every request, ours (module
# mode, and script mode on a Redis without the module) beside
# go-redis/redis_rate, ulule/limiter (its Redis store) and
# go-chi/httprate-redis, on one Redis, and no limiter: interleaved rounds,
# medians of requests/s and of app and Redis CPU a request, on the
# admitted and the denied path (clients/go/bench: its own Go module, so the
# comparison libraries never enter the client's). Writes the table into
# clients/go/README.md. ROUNDS, SECONDS_PER_RUN and CONNECTIONS size it.
# Holds /tmp/redis-ratelimit-bench.lock (or $BENCH_LOCK) so two benchmarks
# never run at once.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
lock=${BENCH_LOCK:-/tmp/redis-ratelimit-bench.lock}
if [ -z "${BENCH_LOCKED:-}" ]; then exec env BENCH_LOCKED=1 flock "$lock" "$0" "$@"; fi

dir=$(mktemp -d)
module_port=$((20000 + RANDOM % 20000))
plain_port=$((module_port + 1))
trap 'redis-cli -p $module_port shutdown nosave >/dev/null 2>&1 || true; redis-cli -p $plain_port shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

(cd clients/go/bench && go build -o "$dir/app" ./app && go build -o "$dir/driver" .)
redis-server --port "$module_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --daemonize yes \
  --logfile "$dir/module.log" --loadmodule "$root/target/release/libredis_ratelimit.so"
redis-server --port "$plain_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --daemonize yes \
  --logfile "$dir/plain.log" --dbfilename plain.rdb
until redis-cli -p "$module_port" ping >/dev/null 2>&1 && redis-cli -p "$plain_port" ping >/dev/null 2>&1; do sleep 0.1; done
"$dir/driver" -app "$dir/app" -module "127.0.0.1:$module_port" -plain "127.0.0.1:$plain_port" \
  -rounds "${ROUNDS:-3}" -seconds "${SECONDS_PER_RUN:-3}" -connections "${CONNECTIONS:-16}" \
  -readme "${README:-$root/clients/go/README.md}"
