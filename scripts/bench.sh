#!/usr/bin/env bash
# make bench: requests/s of INCR, the seed's Lua token bucket (EVALSHA),
# the five RL.* commands, RL.MULTI and RL.PEEK on random keys, at pipelining 1 and 16 with 50
# clients, all against one redis-server started here, so the ratios to INCR
# compare like with like on a noisy machine. Then usec_per_call and
# used_memory per key.
set -euo pipefail
cd "$(dirname "$0")/.."

port=${BENCH_PORT:-6390}
requests=${BENCH_REQUESTS:-1000000}
keys=${BENCH_KEYS:-1000000}
dir=$(mktemp -d)
cli() { redis-cli -p "$port" "$@"; }

# CELL_MODULE=/path/to/libredis_cell.so adds redis-cell's CL.THROTTLE to
# the comparison with RL.THROTTLE.
cell=()
[ -z "${CELL_MODULE:-}" ] || cell=(--loadmodule "$CELL_MODULE")
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
  --loadmodule "$PWD/target/release/libredis_ratelimit.so" "${cell[@]}" --daemonize yes \
  --logfile "$dir/redis.log" --pidfile "$dir/redis.pid"
trap 'cli shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
until cli ping >/dev/null 2>&1; do sleep 0.1; done

sha=$(cli -x script load < lua/token_bucket.lua)
now=$(date +%s.%3N)

# rps NAME PIPELINE COMMAND...: requests per second, from redis-benchmark's CSV.
rps() {
  local pipeline=$1; shift
  local n=$requests
  [ "$pipeline" -gt 1 ] || n=$((requests / 5))
  redis-benchmark -p "$port" -c 50 -n "$n" -P "$pipeline" -r 1000000 --csv "$@" \
    | awk -F'","' 'NR == 2 { print $2 + 0 }'
}

# Each run starts on an empty database, so every one creates its keys.
# INCR runs again after every command, and each command is compared with
# the INCR runs just before and after it: this machine's speed drifts.
fresh_rps() { cli flushall >/dev/null; rps "$@"; }
cli config resetstat >/dev/null
declare -A last
for pipeline in 1 16; do last[$pipeline]=$(fresh_rps "$pipeline" INCR key:__rand_int__); done
printf '%-16s %10s %14s %10s %14s\n' command "P=1 rps" "P=1 vs INCR" "P=16 rps" "P=16 vs INCR"
printf '%-16s %10.0f %13.2fx %10.0f %13.2fx\n' INCR "${last[1]}" 1 "${last[16]}" 1
measure() {
  local name=$1 line="" pipeline ours incr
  shift
  for pipeline in 1 16; do
    ours=$(fresh_rps "$pipeline" "$@")
    incr=$(fresh_rps "$pipeline" INCR key:__rand_int__)
    line+=$(printf ' %10.0f %13.2fx' "$ours" "$(echo "2 * $ours / (${last[$pipeline]} + $incr)" | bc -l)")
    last[$pipeline]=$incr
  done
  printf '%-16s%s\n' "$name" "$line"
}
# Parameters under which no key expires during the run, as INCR's keys do
# not: the comparison is of the commands, not of Redis deleting keys.
measure "SET PX (Redis)" SET set:__rand_int__ 1 PX 100000000
measure "Lua EVALSHA" EVALSHA "$sha" 1 lua:__rand_int__ 100 0.01 "$now" 1
measure RL.TOKENBUCKET RL.TOKENBUCKET tb:__rand_int__ 100 0.01 '*' 1
measure RL.LEAKYBUCKET RL.LEAKYBUCKET lb:__rand_int__ 100 0.01 '*' 1
measure RL.FIXEDWINDOW RL.FIXEDWINDOW fw:__rand_int__ 100 100000 '*' 1
measure RL.SLIDINGWINDOW RL.SLIDINGWINDOW sw:__rand_int__ 100 100000 '*' 1
measure RL.SLIDINGLOG RL.SLIDINGLOG sl:__rand_int__ 100 100000 '*' 1
measure "RL.MULTI (2 limits)" RL.MULTI 2 ma:__rand_int__ mb:__rand_int__ '*' \
  TOKENBUCKET 100 0.01 1 FIXEDWINDOW 100 100000 1
measure RL.PEEK RL.PEEK pk:__rand_int__ TOKENBUCKET 100 0.01 '*' 1
measure RL.THROTTLE RL.THROTTLE th:__rand_int__ 100 1 100 1
if [ -n "${CELL_MODULE:-}" ]; then
  measure "CL.THROTTLE (cell)" CL.THROTTLE cl:__rand_int__ 100 1 100 1
else
  echo "(CL.THROTTLE of redis-cell: set CELL_MODULE=/path/to/libredis_cell.so to compare)"
fi
echo
cli info commandstats | tr -d '\r' | grep -iE 'cmdstat_(incr|rl\.|cl\.)' \
  | sed 's/cmdstat_\([^:]*\):.*usec_per_call=\([0-9.]*\).*/\1 usec_per_call: \2/'

# bytes NAME SCRIPT: used_memory per key after SCRIPT creates $keys keys.
bytes() {
  cli flushall >/dev/null
  local before after
  before=$(cli info memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
  cli eval "for i = 1, $keys do local k = 'key:' .. string.format('%012d', i) $2 end" 0 >/dev/null
  after=$(cli info memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
  printf '%-34s %6.1f bytes/key\n' "$1" "$(echo "($after - $before) / $keys" | bc -l)"
}
echo "used_memory per key, $keys keys named key:000000000001 ...:"
bytes "SET key 1 EX 60" "redis.call('SET', k, 1, 'EX', 60)"
# What lua/token_bucket.lua leaves after a first call (a script cannot call
# EVALSHA, so its two writes are spelled out).
bytes "Lua token bucket (hash + EXPIRE)" \
  "redis.call('HSET', k, 'tokens', 99, 'last_updated', '$now') redis.call('EXPIRE', k, 20000)"
for command in RL.TOKENBUCKET RL.LEAKYBUCKET; do
  bytes "$command" "redis.call('$command', k, 100, 0.01, '*', 1)"
done
# The largest bucket that keeps 16 bytes of state, and the smallest that
# needs 24: after one call 18446745 tokens are left, past 64 bits of
# pico-tokens.
bytes "RL.TOKENBUCKET capacity 18446744" "redis.call('RL.TOKENBUCKET', k, 18446744, 1, '*', 1)"
bytes "RL.TOKENBUCKET capacity 18446746" "redis.call('RL.TOKENBUCKET', k, 18446746, 1, '*', 1)"
for command in RL.FIXEDWINDOW RL.SLIDINGWINDOW RL.SLIDINGLOG; do
  bytes "$command" "redis.call('$command', k, 100, 3600, '*', 1)"
done
bytes RL.THROTTLE "redis.call('RL.THROTTLE', k, 100, 1, 100, 1)"
[ -z "${CELL_MODULE:-}" ] || bytes "CL.THROTTLE (redis-cell)" "redis.call('CL.THROTTLE', k, 100, 1, 100, 1)"
