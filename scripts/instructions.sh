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
# Script mode's rows (seed, fcall, evalsha) call lua/ratelimit.lua as the
# clients do, through FCALL of its library and through EVALSHA, on the
# bench's script rows (scripts/bench.sh), beside the seed's token bucket
# (lua/token_bucket.lua) with its time given; each, and the module's
# RL.TOKENBUCKET, RL.FIXEDWINDOW and RL.MULTI, is also printed over the
# seed's row of the same path (issue 32's goals: under FCALL 1.5x, RL.MULTI
# of two limits 2x; under EVALSHA 3x; * past the goal). A script call costs
# some ten times a module call, so these rows take SCRIPT_N1 and SCRIPT_N2
# calls (default 500 and 2500).
#
#   REDIS_SERVER=path   the server (default: redis-server); GCRA rows when
#                       it has the command
#   MODULE=path         the module (default: target/release's build)
#   CASES="tb gcra ref other sl multi seed floor fcall evalsha"   which rows
#                       (default: all that apply)
#   ONLY=regex          only the rows whose label matches
set -euo pipefail
# No globbing: the commands' `*` (now from the server's clock) is an
# argument, however it is expanded.
set -f
cd "$(dirname "$0")/.."

server=${REDIS_SERVER:-redis-server}
module=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
port=${INSTRUCTIONS_PORT:-6391}
n1=${N1:-5000} n2=${N2:-25000}
script_n1=${SCRIPT_N1:-500} script_n2=${SCRIPT_N2:-2500}
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
  find "$out" -name 'cg.*' -delete
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
  eval "$prepare"
  if [ "$range" = seq ]; then
    # One call on each of the keys 0..calls-1, in order (redis-cli --pipe).
    numbered "$calls" "$*" | redis-cli -p "$port" --pipe >"$out/bench.log" 2>&1 || true
    if ! grep -q "errors: 0, replies: $calls" "$out/bench.log"; then
      cat "$out/bench.log" >&2
      cli shutdown nosave || kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      return 1
    fi
  elif ! redis-benchmark -p "$port" -c 1 -n "$calls" -P 16 -r "$range" "$@" >"$out/bench.log" 2>&1 \
     || grep -q "aborting" "$out/bench.log"; then
    cat "$out/bench.log" >&2
    cli shutdown nosave || kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    return 1
  fi
  cli shutdown nosave || true
  wait "$pid" || true
  file=$(find "$out" -name 'cg.*')
  callgrind_annotate --inclusive=yes "$file" 2>/dev/null | awk '
    /PROGRAM TOTALS/ { gsub(",", "", $1); whole = $1 }
    $4 ~ /^\[/ && $3 ~ /^(\?\?\?|.*\/server\.c):call$/ { gsub(",", "", $1); call = $1 }
    END { printf "%.0f %.0f\n", whole, call }'
}

# numbered CALLS COMMAND: the command once for each of the keys 0..CALLS-1,
# __seq__ their number (as redis-benchmark spells __rand_int__), one inline
# command a line for redis-cli --pipe.
numbered() {
  awk -v line="$2" -v n="$1" 'BEGIN { for (i = 0; i < n; i++) {
      l = line; gsub(/__seq__/, sprintf("%012d", i), l); printf "%s\r\n", l } }'
}

# row LABEL RANGE PREPARE COMMAND...: prints the row and keeps its figures
# in $out/rows (label, whole, call()) for the ratios.
row() {
  local label=$1 w1 c1 w2 c2 a=$n1 b=$n2
  shift
  if [ -n "${ONLY:-}" ] && ! grep -Eq -- "$ONLY" <<<"$label"; then return; fi
  case $label in "Lua "* | "script "*) a=$script_n1 b=$script_n2 ;; esac
  local first second
  first=$(count "$a" "$@") && second=$(count "$b" "$@") || exit 1
  read -r w1 c1 <<<"$first"
  read -r w2 c2 <<<"$second"
  local calls=$((b - a)) whole call
  whole=$(((w2 - w1) / calls)) call=$(((c2 - c1) / calls))
  if [ "$c2" = 0 ] && [ -z "${no_call:-}" ]; then
    echo "instructions: no call() in $server's profile (0 below); the whole server's figures stand" >&2
    no_call=1
  fi
  printf '| %s | %d | %d |\n' "$label" "$whole" "$call"
  printf '%s\t%d\t%d\n' "$label" "$whole" "$call" >>"$out/rows"
}

# What prepares a path: nothing, 1000 warm keys (named as redis-benchmark
# names them), or one exhausted key. The parameters are the bench's.
none() { :; }
keys() {
  awk -v line="$1" 'BEGIN { for (i = 0; i < 1000; i++) {
      l = line; gsub(/%s/, sprintf("%012d", i), l); print l } }' | redis-cli -p "$port" >/dev/null
}
warm_tb() { keys 'RL.TOKENBUCKET tb:%s 1000000 0.001 * 1'; }
deny_tb() { cli RL.TOKENBUCKET tb:one 1 0.000001 '*' 1; }
warm_gcra() { keys 'GCRA gcra:%s 100000 1 1000'; }
deny_gcra() { cli GCRA gcra:one 0 1 1000000; }
warm_th() { keys 'RL.THROTTLE th:%s 100000 1 1000'; }
deny_th() { cli RL.THROTTLE th:one 0 1 1000000; }
set_get() { cli SET get:one 1; }
warm_lb() { keys 'RL.LEAKYBUCKET lb:%s 1000000 0.001 * 1'; }
warm_fw() { keys 'RL.FIXEDWINDOW fw:%s 1000000 1000000000 * 1'; }
deny_fw() { cli RL.FIXEDWINDOW fw:one 1 1000000000 '*' 1; }
warm_multi() { keys 'RL.MULTI 2 {m%s}:a {m%s}:b * TOKENBUCKET 1000000 0.001 1 FIXEDWINDOW 1000000 1000000000 1'; }
deny_multi() { cli RL.MULTI 2 '{mone}:a' '{mone}:b' '*' TOKENBUCKET 1 0.000001 1 FIXEDWINDOW 1 1000000000 1; }
warm_sw() { keys 'RL.SLIDINGWINDOW sw:%s 1000000 1000000000 * 1'; }
warm_sl() { keys 'RL.SLIDINGLOG sl:%s 1000000 1000000000 * 1'; }
warm_cc() { keys 'RL.ACQUIRE cc:%s 1000000 1000000000 * 1'; }
deny_sl() { cli RL.SLIDINGLOG sl:one 1 1000000000 '*' 1; }

# Script mode: the seed's script and lua/ratelimit.lua loaded as the
# clients load them (SCRIPT LOAD, and FUNCTION LOAD of the library with its
# two header lines), then what prepares the path, named as redis-benchmark
# names the keys, called as the row is.
seed_sha=$(sha1sum lua/token_bucket.lua | cut -c1-40)
script_sha=$(sha1sum lua/ratelimit.lua | cut -c1-40)
library=ratelimit_${script_sha:0:12}
seed_now=1700000000.000
scripts() {
  redis-cli -p "$port" -x script load <lua/token_bucket.lua >/dev/null
  redis-cli -p "$port" -x script load <lua/ratelimit.lua >/dev/null
  { printf '#!lua name=%s\nlocal RATELIMIT_FUNCTION = %s\n' "$library" "'$library'"
    cat lua/ratelimit.lua; } | redis-cli -p "$port" -x function load >/dev/null
  redis-cli -p "$port" -x function load <scripts/instructions-floor.lua >/dev/null
}
# script_keys COMMAND: the scripts, then COMMAND on the 1000 keys.
script_keys() { scripts; keys "$1"; }
# script_once COMMAND: the scripts, then COMMAND once.
script_once() { scripts; redis-cli -p "$port" "$@" >/dev/null; }
# script_seq COMMAND: the scripts, then COMMAND on SCRIPT_N2 keys
# (__seq__), as many in each run.
script_seq() { scripts; numbered "$script_n2" "$1" | redis-cli -p "$port" --pipe >/dev/null; }

gcra=0
if "$server" --port "$port" --bind 127.0.0.1 --save "" --daemonize yes \
     --pidfile "$out/probe.pid" --logfile "$out/probe.log" \
   && until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done \
   && redis-cli -p "$port" command info gcra | grep -qix gcra; then
  gcra=1
fi
cli shutdown nosave || true
while redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done

# script_rows FORM CALL: every command of script mode called as CALL, with
# the bench's script rows' parameters (scripts/bench.sh).
script_rows() {
  local form=$1 call=$2 k algorithm
  k=s${form:0:1}
  local tb="RL.TOKENBUCKET 1000000 0.001 * 1" tb_deny="RL.TOKENBUCKET 1 0.000001 * 1"
  row "script $form RL.TOKENBUCKET, new keys" 100000 scripts $call 1 ${k}tb:__rand_int__ $tb
  row "script $form RL.TOKENBUCKET, 1000 warm keys" 1000 "script_keys '$call 1 ${k}tb:%s $tb'" \
    $call 1 ${k}tb:__rand_int__ $tb
  row "script $form RL.TOKENBUCKET, one key denied" 1 "script_once $call 1 ${k}tb:one $tb_deny" \
    $call 1 ${k}tb:one $tb_deny
  row "script $form RL.TOKENBUCKET (now given), 1000 warm keys" 1000 \
    "script_keys '$call 1 ${k}tn:%s RL.TOKENBUCKET 1000000 0.001 $seed_now 1'" \
    $call 1 ${k}tn:__rand_int__ RL.TOKENBUCKET 1000000 0.001 $seed_now 1
  row "script $form RL.LEAKYBUCKET, 1000 warm keys" 1000 \
    "script_keys '$call 1 ${k}lb:%s RL.LEAKYBUCKET 1000000 0.001 * 1'" \
    $call 1 ${k}lb:__rand_int__ RL.LEAKYBUCKET 1000000 0.001 '*' 1
  for algorithm in FIXEDWINDOW SLIDINGWINDOW SLIDINGLOG; do
    row "script $form RL.$algorithm, 1000 warm keys" 1000 \
      "script_keys '$call 1 ${k}${algorithm,,}:%s RL.$algorithm 1000000 1000000000 * 1'" \
      $call 1 ${k}${algorithm,,}:__rand_int__ RL.$algorithm 1000000 1000000000 '*' 1
  done
  row "script $form RL.FIXEDWINDOW, one key denied" 1 \
    "script_once $call 1 ${k}fw:one RL.FIXEDWINDOW 1 1000000000 '*' 1" \
    $call 1 ${k}fw:one RL.FIXEDWINDOW 1 1000000000 '*' 1
  local multi="TOKENBUCKET 1000000 0.001 1 FIXEDWINDOW 1000000 1000000000 1"
  row "script $form RL.MULTI (2 limits), new keys" 100000 scripts \
    $call 2 "{${k}m__rand_int__}:a" "{${k}m__rand_int__}:b" RL.MULTI '*' $multi
  row "script $form RL.MULTI (2 limits), 1000 warm keys" 1000 \
    "script_keys '$call 2 {${k}m%s}:a {${k}m%s}:b RL.MULTI * $multi'" \
    $call 2 "{${k}m__rand_int__}:a" "{${k}m__rand_int__}:b" RL.MULTI '*' $multi
  row "script $form RL.MULTI (2 limits), one key denied" 1 \
    "script_once $call 2 {${k}mone}:a {${k}mone}:b RL.MULTI '*' TOKENBUCKET 1 0.000001 1 FIXEDWINDOW 1 1000000000 1" \
    $call 2 "{${k}mone}:a" "{${k}mone}:b" RL.MULTI '*' TOKENBUCKET 1 0.000001 1 FIXEDWINDOW 1 1000000000 1
  row "script $form RL.PEEK, 1000 warm keys" 1000 "script_keys '$call 1 ${k}pk:%s $tb'" \
    $call 1 ${k}pk:__rand_int__ RL.PEEK TOKENBUCKET 1000000 0.001 '*' 1
  row "script $form RL.REFUND, 1000 warm keys" 1000 \
    "script_keys '$call 1 ${k}rf:%s RL.TOKENBUCKET 1000000 0.001 * 1000'" \
    $call 1 ${k}rf:__rand_int__ RL.REFUND TOKENBUCKET 1000000 0.001 '*' 1
  row "script $form RL.ACQUIRE, 1000 warm keys" 1000 \
    "script_keys '$call 1 ${k}cc:%s RL.ACQUIRE 1000000 1000000000 * 1'" \
    $call 1 ${k}cc:__rand_int__ RL.ACQUIRE 1000000 1000000000 '*' 1
  row "script $form RL.RELEASE, one lease a key" seq \
    "script_seq '$call 1 ${k}rl:__seq__ RL.ACQUIRE 1000000 1000000000 * 1'" \
    $call 1 ${k}rl:__seq__ RL.RELEASE 1 '*'
  row "script $form RL.RENEW, 1000 warm keys" 1000 \
    "script_keys '$call 1 ${k}rn:%s RL.ACQUIRE 1000000 1000000000 * 1'" \
    $call 1 ${k}rn:__rand_int__ RL.RENEW 1 1000000000 '*'
}

# ratios: each script row's call() and whole-server figures over the
# seed's of the same path, against issue 32's goals.
ratios() {
  [ -s "$out/rows" ] && grep -q '^Lua EVALSHA (seed)' "$out/rows" || return 0
  echo
  echo "the module and script mode over the seed's token bucket, same path (call(), whole server; * past the goal):"
  echo
  echo "| command, path | call() | whole server |"
  echo "|---|---|---|"
  awk -F'\t' '
    NR == FNR { if ($1 ~ /^Lua EVALSHA \(seed\)/) { split($1, p, ", "); seed_w[p[2]] = $2; seed_c[p[2]] = $3 }; next }
    $1 ~ /^(script |RL\.(TOKENBUCKET|FIXEDWINDOW|MULTI))/ {
      n = split($1, p, ", "); path = p[n]
      if (path ~ /warm|lease/) path = "1000 warm keys"
      if (!(path in seed_c)) next
      goal = $1 !~ /^script/ ? 1e9 : $1 ~ /EVALSHA/ ? 3 : ($1 ~ /MULTI/ ? 2 : 1.5)
      w = $2 / seed_w[path]
      if (seed_c[path] == 0) { cs = "n/a" } else { c = $3 / seed_c[path]; cs = sprintf("%.2fx%s", c, (c > goal ? " *" : "")) }
      printf "| %s | %s | %.2fx%s |\n", $1, cs, w, (w > goal ? " *" : "")
    }' "$out/rows" "$out/rows"
}

cases=${CASES:-tb gcra ref other sl multi seed floor fcall evalsha}
echo "instructions per call, $("$server" --version | cut -d' ' -f1-3), valgrind callgrind,"
echo "the difference of $n1 and $n2 calls (script mode's rows: $script_n1 and $script_n2;"
echo "redis-benchmark -c 1 -P 16, RL.RELEASE through redis-cli --pipe):"
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
      row "RL.ACQUIRE, 1000 warm keys" 1000 warm_cc RL.ACQUIRE cc:__rand_int__ 1000000 1000000000 '*' 1
      row "RL.FIXEDWINDOW, one key denied" 1 deny_fw RL.FIXEDWINDOW fw:one 1 1000000000 '*' 1 ;;
    sl)
      row "RL.SLIDINGLOG, new keys" 100000 none RL.SLIDINGLOG sl:__rand_int__ 1000000 1000000000 '*' 1
      row "RL.SLIDINGLOG, 1000 warm keys" 1000 warm_sl RL.SLIDINGLOG sl:__rand_int__ 1000000 1000000000 '*' 1
      row "RL.SLIDINGLOG, one key denied" 1 deny_sl RL.SLIDINGLOG sl:one 1 1000000000 '*' 1 ;;
    multi)
      multi="TOKENBUCKET 1000000 0.001 1 FIXEDWINDOW 1000000 1000000000 1"
      row "RL.MULTI (2 limits), new keys" 100000 none RL.MULTI 2 "{m__rand_int__}:a" "{m__rand_int__}:b" '*' $multi
      row "RL.MULTI (2 limits), 1000 warm keys" 1000 warm_multi RL.MULTI 2 "{m__rand_int__}:a" "{m__rand_int__}:b" '*' $multi
      row "RL.MULTI (2 limits), one key denied" 1 deny_multi \
        RL.MULTI 2 "{mone}:a" "{mone}:b" '*' TOKENBUCKET 1 0.000001 1 FIXEDWINDOW 1 1000000000 1 ;;
    seed)
      row "Lua EVALSHA (seed), new keys" 100000 scripts \
        EVALSHA "$seed_sha" 1 lua:__rand_int__ 1000000 0.001 $seed_now 1
      row "Lua EVALSHA (seed), 1000 warm keys" 1000 \
        "script_keys 'EVALSHA $seed_sha 1 lua:%s 1000000 0.001 $seed_now 1'" \
        EVALSHA "$seed_sha" 1 lua:__rand_int__ 1000000 0.001 $seed_now 1
      row "Lua EVALSHA (seed), one key denied" 1 \
        "script_once EVALSHA $seed_sha 1 lua:one 1 0.000001 $seed_now 1" \
        EVALSHA "$seed_sha" 1 lua:one 1 0.000001 $seed_now 1 ;;
    floor)
      # What a script of each shape costs at least (scripts/instructions-floor.lua).
      floor_args="RL.TOKENBUCKET 1000000 0.001 * 1"
      row "script floor: a limit's calls only, 1000 warm keys" 1000 "script_keys 'FCALL floor_limit 1 fl:%s $floor_args'" \
        FCALL floor_limit 1 fl:__rand_int__ $floor_args
      row "script floor: a limit's calls only, now given, 1000 warm keys" 1000 \
        "script_keys 'FCALL floor_limit_now_given 1 fn:%s RL.TOKENBUCKET 1000000 0.001 $seed_now 1'" \
        FCALL floor_limit_now_given 1 fn:__rand_int__ RL.TOKENBUCKET 1000000 0.001 $seed_now 1
      floor_multi="RL.MULTI * TOKENBUCKET 1000000 0.001 1 FIXEDWINDOW 1000000 1000000000 1"
      row "script floor: RL.MULTI's calls only (2 limits), 1000 warm keys" 1000 \
        "script_keys 'FCALL floor_multi 2 {fm%s}:a {fm%s}:b $floor_multi'" \
        FCALL floor_multi 2 "{fm__rand_int__}:a" "{fm__rand_int__}:b" $floor_multi
      row "script floor: a counter (PTTL, INCR), 1000 warm keys" 1000 "script_keys 'FCALL floor_counter 1 fc:%s'" \
        FCALL floor_counter 1 fc:__rand_int__
      # A long log's take where no run has left, 1000 keys of 300 runs: this
      # version's calls, and the next layout's (rl2).
      long_log="rl1:sl:1700000000000000:1$(printf ',1000:1%.0s' $(seq 299))"
      row "script floor: a long log's take (GET, APPEND), 1000 warm keys of 300 runs" 1000 \
        "script_keys 'SET fg:%s $long_log'" FCALL floor_log 1 fg:__rand_int__
      row "script floor: a long log's take, next layout (GETRANGE, SETRANGE, APPEND), 1000 warm keys of 300 runs" 1000 \
        "script_keys 'SET fr:%s $long_log'" FCALL floor_log_next 1 fr:__rand_int__ ;;
    fcall) script_rows FCALL "FCALL $library" ;;
    evalsha) script_rows EVALSHA "EVALSHA $script_sha" ;;
  esac
done
ratios
