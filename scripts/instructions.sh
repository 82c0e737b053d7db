#!/usr/bin/env bash
# make instructions: the server's instructions per call, counted by
# valgrind's callgrind, on the bench's three paths. Unlike usec_per_call,
# the count does not move with the machine's load: the same build and
# inputs give the same figure, so small changes can be compared.
#
# Each case runs twice in a fresh server under callgrind, with N1 and N2
# calls (redis-benchmark -c 1 -P 16): the difference divided by N2 - N1 is
# the cost of one call, startup and preparation cancelling out. Two
# figures: the whole server per call (reading the request, replying), and
# `call()`, Redis's own function around the command, which is what
# usec_per_call times.
#
#   REDIS_SERVER=path   the server (default: redis-server); GCRA rows when
#                       it has the command
#   MODULE=path         the module (default: target/release's build)
#   CASES="tb gcra ref other sl multi"   which rows (default: all that
#                       apply)
set -euo pipefail
cd "$(dirname "$0")/.."

server=${REDIS_SERVER:-redis-server}
module=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
port=${INSTRUCTIONS_PORT:-6391}
n1=${N1:-5000} n2=${N2:-25000}
out=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
cli() { redis-cli -p "$port" "$@" >/dev/null; }

if redis-cli -p "$port" ping >/dev/null 2>&1; then
  echo "port $port is taken (INSTRUCTIONS_PORT picks another)" >&2
  exit 1
fi

# count CALLS RANGE PREPARE COMMAND...: "whole call" instruction totals of
# one server run that prepares, then runs COMMAND CALLS times. On a loaded
# machine the server under valgrind can be slow enough for redis-benchmark
# to give up mid-run ("All clients disconnected... aborting"): a partial
# run would give a wrong figure, so the run is thrown away and tried again.
count() {
  local attempt
  for attempt in 1 2 3 4 5; do
    if count_once "$@"; then return 0; fi
    echo "instructions: run $attempt of '${*:4}' failed (see above); trying again in $((attempt * 5)) s" >&2
    sleep $((attempt * 5))
  done
  echo "instructions: '${*:4}' failed 5 times; giving up" >&2
  return 1
}

count_once() {
  local calls=$1 range=$2 prepare=$3 pid file waited=0
  shift 3
  rm -f "$out"/cg.*
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p" "$server" --port "$port" \
    --bind 127.0.0.1 --save "" --appendonly no --timeout 0 --loadmodule "$module" >"$out/server.log" 2>&1 &
  pid=$!
  until redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; do
    sleep 0.2
    waited=$((waited + 1))
    if [ "$waited" -gt 600 ] || ! kill -0 "$pid" 2>/dev/null; then
      echo "instructions: the server did not start (log: $(tail -3 "$out/server.log"))" >&2
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      return 1
    fi
  done
  $prepare
  if ! redis-benchmark -p "$port" -c 1 -n "$calls" -P 16 -r "$range" "$@" >"$out/bench.log" 2>&1 \
     || grep -q "aborting" "$out/bench.log"; then
    cat "$out/bench.log" >&2
    cli shutdown nosave || kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    return 1
  fi
  cli shutdown nosave || true
  wait "$pid" || true
  file=$(ls "$out"/cg.*)
  callgrind_annotate --inclusive=yes "$file" 2>/dev/null | awk '
    /PROGRAM TOTALS/ { gsub(",", "", $1); whole = $1 }
    index($0, "???:call [") { gsub(",", "", $1); call = $1 }
    END { print whole + 0, call + 0 }'
}

# row LABEL RANGE PREPARE COMMAND...
row() {
  local label=$1 w1 c1 w2 c2
  shift
  local first second
  first=$(count "$n1" "$@") && second=$(count "$n2" "$@") || exit 1
  read -r w1 c1 <<<"$first"
  read -r w2 c2 <<<"$second"
  local calls=$((n2 - n1))
  printf '| %s | %d | %d |\n' "$label" $(((w2 - w1) / calls)) $(((c2 - c1) / calls))
}

# What prepares a path: nothing, 1000 warm keys (named as redis-benchmark
# names them), or one exhausted key. The parameters are the bench's.
none() { :; }
keys() { for i in $(seq 0 999); do printf "$1\n" "$(printf %012d "$i")"; done | redis-cli -p "$port" >/dev/null; }
warm_tb() { keys 'RL.TOKENBUCKET tb:%s 1000000 0.001 * 1'; }
deny_tb() { cli RL.TOKENBUCKET tb:one 1 0.000001 '*' 1; }
warm_gcra() { keys 'GCRA gcra:%s 100000 1 1000'; }
deny_gcra() { cli GCRA gcra:one 0 1 1000000; }
warm_th() { keys 'RL.THROTTLE th:%s 100000 1 1000'; }
deny_th() { cli RL.THROTTLE th:one 0 1 1000000; }
set_get() { cli SET get:one 1; }
warm_lb() { keys 'RL.LEAKYBUCKET lb:%s 1000000 0.001 * 1'; }
warm_fw() { keys 'RL.FIXEDWINDOW fw:%s 1000000 1000000000 * 1'; }
warm_sw() { keys 'RL.SLIDINGWINDOW sw:%s 1000000 1000000000 * 1'; }
warm_sl() { keys 'RL.SLIDINGLOG sl:%s 1000000 1000000000 * 1'; }
warm_cc() { keys 'RL.ACQUIRE cc:%s 1000000 1000000000 * 1'; }
deny_sl() { cli RL.SLIDINGLOG sl:one 1 1000000000 '*' 1; }
warm_multi() {
  for i in $(seq -f %012g 0 999); do
    echo "RL.MULTI 2 ma:$i mb:$i * TOKENBUCKET 1000000 0.001 1 FIXEDWINDOW 1000000 1000000000 1"
  done | redis-cli -p "$port" >/dev/null
}
deny_multi() { cli RL.MULTI 2 ma:one mb:one '*' TOKENBUCKET 1 0.000001 1 FIXEDWINDOW 1 1000000000 1; }

gcra=0
if "$server" --port "$port" --bind 127.0.0.1 --save "" --daemonize yes \
     --pidfile "$out/probe.pid" --logfile "$out/probe.log" \
   && until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done \
   && redis-cli -p "$port" command info gcra | grep -qix gcra; then
  gcra=1
fi
cli shutdown nosave || true
while redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done

cases=${CASES:-tb gcra ref other sl multi}
echo "instructions per call, $("$server" --version | cut -d' ' -f1-3), valgrind callgrind,"
echo "the difference of $n1 and $n2 calls (redis-benchmark -c 1 -P 16):"
echo
echo "| command, path | whole server | call() |"
echo "|---|---|---|"
for c in $cases; do
  case $c in
    tb)
      row "RL.TOKENBUCKET, new keys" 100000 none RL.TOKENBUCKET tb:__rand_int__ 1000000 0.001 '*' 1
      row "RL.TOKENBUCKET, 1000 warm keys" 1000 warm_tb RL.TOKENBUCKET tb:__rand_int__ 1000000 0.001 '*' 1
      row "RL.TOKENBUCKET, one key denied" 1 deny_tb RL.TOKENBUCKET tb:one 1 0.000001 '*' 1
      row "RL.THROTTLE, new keys" 100000 none RL.THROTTLE th:__rand_int__ 100000 1 1000
      row "RL.THROTTLE, 1000 warm keys" 1000 warm_th RL.THROTTLE th:__rand_int__ 100000 1 1000
      row "RL.THROTTLE, one key denied" 1 deny_th RL.THROTTLE th:one 0 1 1000000 ;;
    gcra)
      [ "$gcra" = 1 ] || { echo "| (no GCRA in $server) | | |"; continue; }
      row "GCRA, new keys" 100000 none GCRA gcra:__rand_int__ 100000 1 1000
      row "GCRA, 1000 warm keys" 1000 warm_gcra GCRA gcra:__rand_int__ 100000 1 1000
      row "GCRA, one key denied" 1 deny_gcra GCRA gcra:one 0 1 1000000 ;;
    ref)
      row "SET PX, new keys" 100000 none SET set:__rand_int__ 1 PX 1000000000000
      row "INCR, 1000 keys" 1000 none INCR incr:__rand_int__
      row "GET, one key" 1 set_get GET get:one ;;
    other)
      row "RL.LEAKYBUCKET, new keys" 100000 none RL.LEAKYBUCKET lb:__rand_int__ 1000000 0.001 '*' 1
      row "RL.FIXEDWINDOW, new keys" 100000 none RL.FIXEDWINDOW fw:__rand_int__ 1000000 1000000000 '*' 1
      row "RL.SLIDINGWINDOW, new keys" 100000 none RL.SLIDINGWINDOW sw:__rand_int__ 1000000 1000000000 '*' 1
      row "RL.ACQUIRE, new keys" 100000 none RL.ACQUIRE cc:__rand_int__ 1000000 1000000000 '*' 1
      row "RL.LEAKYBUCKET, 1000 warm keys" 1000 warm_lb RL.LEAKYBUCKET lb:__rand_int__ 1000000 0.001 '*' 1
      row "RL.FIXEDWINDOW, 1000 warm keys" 1000 warm_fw RL.FIXEDWINDOW fw:__rand_int__ 1000000 1000000000 '*' 1
      row "RL.SLIDINGWINDOW, 1000 warm keys" 1000 warm_sw RL.SLIDINGWINDOW sw:__rand_int__ 1000000 1000000000 '*' 1
      row "RL.ACQUIRE, 1000 warm keys" 1000 warm_cc RL.ACQUIRE cc:__rand_int__ 1000000 1000000000 '*' 1 ;;
    sl)
      row "RL.SLIDINGLOG, new keys" 100000 none RL.SLIDINGLOG sl:__rand_int__ 1000000 1000000000 '*' 1
      row "RL.SLIDINGLOG, 1000 warm keys" 1000 warm_sl RL.SLIDINGLOG sl:__rand_int__ 1000000 1000000000 '*' 1
      row "RL.SLIDINGLOG, one key denied" 1 deny_sl RL.SLIDINGLOG sl:one 1 1000000000 '*' 1 ;;
    multi)
      row "RL.MULTI (2 limits), new keys" 100000 none RL.MULTI 2 ma:__rand_int__ mb:__rand_int__ '*' TOKENBUCKET 1000000 0.001 1 FIXEDWINDOW 1000000 1000000000 1
      row "RL.MULTI (2 limits), 1000 warm keys" 1000 warm_multi RL.MULTI 2 ma:__rand_int__ mb:__rand_int__ '*' TOKENBUCKET 1000000 0.001 1 FIXEDWINDOW 1000000 1000000000 1
      row "RL.MULTI (2 limits), one key denied" 1 deny_multi RL.MULTI 2 ma:one mb:one '*' TOKENBUCKET 1 0.000001 1 FIXEDWINDOW 1 1000000000 1 ;;
  esac
done
