#!/usr/bin/env bash
# make bench-http (Node part): Express 5 with no limiter, with
# redis-ratelimit-client (module mode, and script mode: the Lua library
# through FCALL), with express-rate-limit + rate-limit-redis and with
# rate-limiter-flexible, side by side on one Redis with the module
# (bench-http-node.mjs: requests/s, app and Redis CPU a request, latency),
# then the limiter's call alone (bench-http-call.mjs); the comparison
# libraries are installed from npm into a temporary app, never into the
# package. Writes its tables into clients/node/README.md (or $README).
# ROUNDS, SECONDS_PER_RUN, CONNECTIONS, CALL_ROUNDS and CALLS size it. Holds
# /tmp/redis-ratelimit-bench.lock (or $BENCH_LOCK) so two benchmarks never run at once.
set -euo pipefail
lock=${BENCH_LOCK:-/tmp/redis-ratelimit-bench.lock}
if [ -z "${BENCH_LOCKED:-}" ]; then exec env BENCH_LOCKED=1 flock "$lock" "$0" "$@"; fi
readme=$(realpath "${README:-$(dirname "$0")/../clients/node/README.md}")
cd "$(dirname "$0")/.."
root=$PWD

dir=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
trap 'redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

(cd clients/node && npm ci --no-audit --no-fund >/dev/null && npm pack --pack-destination "$dir" --silent >/dev/null)
cp scripts/bench-http-app.mjs scripts/bench-http-node.mjs scripts/bench-http-call.mjs scripts/bench-readme.mjs "$dir"/
cd "$dir"
echo '{ "name": "bench-http-node", "private": true, "type": "module" }' > package.json
# The peers pinned, as the README's figures name them (bump them together).
npm install --no-audit --no-fund --silent express@5.3.0 redis@5.12.4 express-rate-limit@8.7.5 rate-limit-redis@6.0.1 \
  rate-limiter-flexible@11.4.0 autocannon@9.0.0 ./redis-ratelimit-client-*.tgz
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --daemonize yes \
  --logfile "$dir/redis.log" --loadmodule "$root/target/release/libredis_ratelimit.so"
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
node bench-http-node.mjs "$dir/bench-http-app.mjs" "redis://127.0.0.1:$port" "$readme"
node bench-http-call.mjs "redis://127.0.0.1:$port" "$readme"
