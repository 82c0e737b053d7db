#!/usr/bin/env bash
# make example: Redis with the module on port 6391, and the Express app of
# examples/express on port 3000 in front of it, until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

(cd clients/node && npm ci --no-audit --no-fund >/dev/null && npm run build >/dev/null)
(cd examples/express && npm ci --no-audit --no-fund >/dev/null)
dir=$(mktemp -d)
redis-server --port 6391 --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --daemonize yes \
  --logfile "$dir/redis.log" --loadmodule "$PWD/target/release/libredis_ratelimit.so"
trap 'redis-cli -p 6391 shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
until redis-cli -p 6391 ping >/dev/null 2>&1; do sleep 0.1; done
cd examples/express
REDIS_URL=redis://127.0.0.1:6391 node app.mjs
