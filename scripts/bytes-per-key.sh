#!/usr/bin/env bash
# Bytes per key of each limiter, the module beside script mode: used_memory
# per key after the same calls on the same keys (key:000000000001 ...),
# the module's on a server with it loaded, script mode's (lua/ratelimit.lua
# through EVALSHA) on a server without it, and the seed's Lua hash
# (lua/token_bucket.lua) beside the token bucket. The calls give their time
# (one millisecond apart), so both modes store the same numbers and set
# the same expiry. Memory is measured once each dictionary has finished
# growing (no rehash under way), on a flushed database.
#
# Prints a Markdown table; with a file argument, also a CSV there.
# Environment: REDIS_SERVER (default redis-server), MEMORY_KEYS (20000).
# make bench runs it (scripts/bench.sh); it runs alone as well, and is not
# CPU-noisy: the figures do not depend on the machine's load.
set -euo pipefail
cd "$(dirname "$0")/.."

server=${REDIS_SERVER:-redis-server}
keys=${MEMORY_KEYS:-20000}
csv=${1:-}
module=$PWD/target/release/libredis_ratelimit.so
[ -f "$module" ] || { echo "bytes-per-key: $module is missing: cargo build --release" >&2; exit 1; }
dir=$(mktemp -d)
ports=()

stop() {
  local port
  for port in "${ports[@]}"; do redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$dir"
}
trap stop EXIT

# start NAME ARGS...: a server on a free port; sets the variable NAME to it.
start() {
  local name=$1 port
  shift
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mkdir -p "$dir/$name"
  "$server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
    --enable-debug-command yes --dir "$dir/$name" --logfile "$dir/$name/log" "$@"
  ports+=("$port")
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
  printf -v "$name" %s "$port"
}
start module --loadmodule "$module"
start plain

used() { redis-cli -p "$1" info memory | awk -F: '/^used_memory:/ { print $2 + 0 }'; }

# Waits until neither of the database's dictionaries is rehashing.
settled() {
  local tries=0
  while redis-cli -p "$1" debug htstats 0 | grep -q 'rehashing'; do
    tries=$((tries + 1))
    [ "$tries" -lt 100 ] || { echo "bytes-per-key: still rehashing" >&2; exit 1; }
    sleep 0.05
  done
}

now=$(date +%s)

# per_key PORT CALLS COMMAND...: used_memory per key after CALLS calls of
# COMMAND on each key, __key__ standing for the key, __now__ for the time
# of the call (the i-th call at now + i ms).
per_key() {
  local port=$1 calls=$2 before after
  shift 2
  # A first round on a few keys makes what a server allocates once (the
  # buffers a command's first call grows), then goes.
  redis-cli -p "$port" flushall >/dev/null
  calls_on "$port" "$calls" 100 "$@"
  redis-cli -p "$port" flushall >/dev/null
  settled "$port"
  before=$(used "$port")
  calls_on "$port" "$calls" "$keys" "$@"
  [ "$(redis-cli -p "$port" dbsize)" -eq "$keys" ] || { echo "bytes-per-key: $*: not $keys keys" >&2; exit 1; }
  settled "$port"
  after=$(used "$port")
  awk -v a="$after" -v b="$before" -v n="$keys" 'BEGIN { printf "%.1f", (a - b) / n }'
}

# calls_on PORT CALLS KEYS COMMAND...: the calls on keys 1..KEYS.
calls_on() {
  local port=$1 calls=$2 keys=$3
  shift 3
  # The calls in Redis's protocol, pipelined (redis-cli --pipe).
  awk -v n="$keys" -v calls="$calls" -v now="$now" -v line="$*" 'BEGIN {
    words = split(line, word, " ")
    for (c = 0; c < calls; c++) for (i = 1; i <= n; i++) {
      printf "*%d\r\n", words
      for (w = 1; w <= words; w++) {
        arg = word[w]; gsub(/__key__/, sprintf("key:%012d", i), arg)
        gsub(/__now__/, sprintf("%d.%03d", now, c), arg)
        printf "$%d\r\n%s\r\n", length(arg), arg } } }' \
    | redis-cli -p "$port" --pipe >"$dir/replies"
  grep -q 'errors: 0,' "$dir/replies" || { echo "bytes-per-key: $* failed: $(cat "$dir/replies")" >&2; exit 1; }
}

script=$(redis-cli -p "$plain" -x script load <lua/ratelimit.lua)
# A first measurement on each server, not shown: the first one grows what
# a server keeps from then on (a few bytes a key, in both modes alike).
per_key "$module" 1 RL.FIXEDWINDOW __key__ 1000000 1000000000 __now__ 1 >/dev/null
per_key "$plain" 1 EVALSHA "$script" 1 __key__ RL.FIXEDWINDOW 1000000 1000000000 __now__ 1 >/dev/null
seed=$(redis-cli -p "$plain" -x script load <lua/token_bucket.lua)

# row LABEL CALLS COMMAND ARGS...: the module's figure and script mode's
# for the same call (no script mode for RL.THROTTLE).
echo "used_memory per key, $keys keys, $("$server" --version | cut -d' ' -f1-3):"
echo
echo "| limiter | module | script mode | the seed's hash |"
echo "|---|---|---|---|"
[ -z "$csv" ] || echo "limiter,module,script,seed" >"$csv"
row() {
  local label=$1 calls=$2 command=$3 mod lua="" hash=""
  shift 3
  mod=$(per_key "$module" "$calls" "$command" __key__ "$@")
  if [ "$command" != RL.THROTTLE ]; then
    lua=$(per_key "$plain" "$calls" EVALSHA "$script" 1 __key__ "$command" "$@")
  fi
  if [ "$command" = RL.TOKENBUCKET ]; then
    hash=$(per_key "$plain" "$calls" EVALSHA "$seed" 1 __key__ 1000000 0.001 __now__ 1)
  fi
  echo "| $label | $mod | ${lua:--} | ${hash:--} |"
  [ -z "$csv" ] || echo "$label,$mod,$lua,$hash" >>"$csv"
}
row "token bucket" 1 RL.TOKENBUCKET 1000000 0.001 __now__ 1
row "leaky bucket" 1 RL.LEAKYBUCKET 1000000 0.001 __now__ 1
row "fixed window" 1 RL.FIXEDWINDOW 1000000 1000000000 __now__ 1
row "sliding window" 1 RL.SLIDINGWINDOW 1000000 1000000000 __now__ 1
row "sliding log, 1 call" 1 RL.SLIDINGLOG 1000000 1000000000 __now__ 1
row "sliding log, 5 calls" 5 RL.SLIDINGLOG 1000000 1000000000 __now__ 1
row "concurrency, 1 lease" 1 RL.ACQUIRE 1000000 1000000000 __now__ 1
row "concurrency, 2 leases" 2 RL.ACQUIRE 1000000 1000000000 __now__ 1
row "RL.THROTTLE" 1 RL.THROTTLE 100000 1 1000
