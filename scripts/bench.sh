#!/usr/bin/env bash
# make bench: the server's own time per call (usec_per_call of INFO
# commandstats) of every RL.* command beside Redis's INCR, SET PX and GET,
# the seed's Lua script, core GCRA (when the server has it) and redis-cell's
# CL.THROTTLE, on three paths:
#   new    random keys among 100000 on a flushed database (early calls
#          create the keys);
#   warm   1000 keys created beforehand, every call admitted;
#   denied one key exhausted beforehand, every call denied.
# Three interleaved rounds; the figure is the median of the rounds.
# Then used_memory per key for BENCH_KEYS keys, each limiter beside script
# mode and the seed's hash (scripts/bytes-per-key.sh), a CSV and docs/bench.svg.
#
# Script mode (lua/ratelimit.lua as the clients call it, through FCALL of
# its library and through EVALSHA, on the same server) has a row for every
# command beside the module's, and a table of each over the seed's token
# bucket. RL.RENEW and RL.RELEASE have one path, "warm keys": RL.RENEW
# renews the lease of one of 1000 keys, RL.RELEASE releases the one lease
# of each of BENCH_REQUESTS keys made for it.
#
# Then what one long sliding log costs (LONG_RUNS runs): an admitted call
# that trims it, RL.PEEK, a load (RESTORE), a save (DUMP), DEBUG
# DIGEST-VALUE.
#
# Environment: REDIS_SERVER (default redis-server on PATH), CELL_MODULE
# (a libredis_cell.so to use instead of building redis-cell), BENCH_REQUESTS
# (per timed run), BENCH_ROUNDS, BENCH_KEYS, BENCH_PORT, LONG_RUNS,
# BENCH_ONLY (an extended regular expression: only the rows whose names
# match are timed and measured, redis-cell is built only when its row
# matches, the long log is left out and the chart is not redrawn;
# BENCH_ONLY=long measures the long log alone).
set -euo pipefail
cd "$(dirname "$0")/.."

server=${REDIS_SERVER:-redis-server}
port=${BENCH_PORT:-6390}
rounds=${BENCH_ROUNDS:-3}
keys=${BENCH_KEYS:-1000000}
clients=50
pipeline=16
# redis-benchmark sends whole pipelines, so a count that is not a multiple
# of the pipeline depth overshoots; rounding it up keeps calls == requests
# an exact check that every timed call, and only those, was counted.
requests=${BENCH_REQUESTS:-500000}
requests=$(((requests + pipeline - 1) / pipeline * pipeline))
# The server on one core, every client tool on the other, so that they do
# not take turns on one core and the server's figure is its own.
server_cpu=0
client_cpu=1
out=target/bench
module=$PWD/target/release/libredis_ratelimit.so
mkdir -p "$out" docs

die() { echo "bench: FAILED: $*" >&2; exit 1; }
note() { echo "$*" >&2; }
cli() { taskset -c "$client_cpu" redis-cli -p "$port" "$@"; }

# --- redis-cell ------------------------------------------------------------

# Sets cell_so, cell_label and cell_row when CL.THROTTLE can be compared,
# else prints why not in one line. CELL_MODULE wins; otherwise the newest
# redis-cell of cargo's registry, fetched with cargo itself: a throwaway
# manifest that depends on redis-cell "*" tells the version, cargo vendor
# brings its source, which is copied to $out/redis-cell-VERSION and built
# there once. Nothing of it is part of the project.
cell_so=""
cell_label=""
cell_row="CL.THROTTLE (redis-cell)"
find_cell() {
  if [ -n "${CELL_MODULE:-}" ]; then
    [ -f "$CELL_MODULE" ] || die "CELL_MODULE=$CELL_MODULE: no such file"
    cell_so=$(realpath "$CELL_MODULE")
    cell_label="CELL_MODULE=$CELL_MODULE"
    return
  fi
  local fetch=$out/cell-fetch log=$out/cell.log version dir
  mkdir -p "$fetch/src"
  : >"$fetch/src/lib.rs"
  cat >"$fetch/Cargo.toml" <<'EOF'
[package]
name = "bench-cell-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
redis-cell = "*"

[workspace]
EOF
  # No lock file kept: "*" resolves to the newest version on every run.
  rm -f "$fetch/Cargo.lock"
  if ! cargo generate-lockfile --manifest-path "$fetch/Cargo.toml" >"$log" 2>&1; then
    cell_skip "cargo could not resolve it: $(first_error "$log")"
    return
  fi
  version=$(awk -F'"' '$0 == "name = \"redis-cell\"" { getline; print $2; exit }' "$fetch/Cargo.lock")
  dir=$out/redis-cell-$version
  if [ ! -f "$dir/Cargo.toml" ]; then
    # Vendoring brings every platform's dependencies too (100+ MB of
    # Windows libraries): keep redis-cell's own source only.
    rm -rf "$fetch/vendor"
    if ! cargo vendor --versioned-dirs --manifest-path "$fetch/Cargo.toml" "$fetch/vendor" >>"$log" 2>&1 \
      || [ ! -d "$fetch/vendor/redis-cell-$version" ]; then
      cell_skip "cargo could not fetch redis-cell $version: $(first_error "$log")"
      return
    fi
    rm -rf "$dir"
    cp -r "$fetch/vendor/redis-cell-$version" "$dir"
    rm -rf "$fetch/vendor"
  fi
  note "redis-cell $version: cargo build --release in $dir (log: $log)"
  if ! (cd "$dir" && CARGO_TARGET_DIR="$PWD/target" cargo build --release) >>"$log" 2>&1; then
    cell_skip "redis-cell $version does not build: $(first_error "$log")"
    return
  fi
  cell_so=$(realpath "$dir/target/release/libredis_cell.so")
  cell_label="redis-cell $version, built from the registry's source"
  cell_row="CL.THROTTLE (redis-cell $version)"
}
cell_skip() { echo "CL.THROTTLE (redis-cell) left out: $*"; }
first_error() { grep -m 1 -E '^(error|warning: spurious)' "$1" || tail -n 1 "$1"; }

# --- the server ------------------------------------------------------------

server_dir=$(mktemp -d)
# Shuts down the server this script started (its pid file says it did),
# however the script ends.
stop_server() {
  [ ! -f "$server_dir/redis.pid" ] || cli shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$server_dir"
}
trap stop_server EXIT

start_server() {
  # Another server on the port would answer the bench's calls instead.
  ! cli ping >/dev/null 2>&1 || die "a server already answers on port $port (BENCH_PORT picks another)"
  local extra=()
  [ -z "$cell_so" ] || extra=(--loadmodule "$cell_so")
  taskset -c "$server_cpu" "$server" --port "$port" --bind 127.0.0.1 --save "" \
    --appendonly no --enable-debug-command yes --dir "$server_dir" --daemonize yes --logfile "$server_dir/redis.log" \
    --pidfile "$server_dir/redis.pid" --loadmodule "$module" "${extra[@]}" \
    || die "$server did not start"
  local tries=0
  until cli ping >/dev/null 2>&1; do
    tries=$((tries + 1))
    [ "$tries" -lt 100 ] || die "$server did not answer; its log: $(tail -n 5 "$server_dir/redis.log")"
    sleep 0.1
  done
}

# One line on the machine, for the output and the chart's subtitle.
machine=""
describe_machine() {
  local cpu version
  cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
  version=$(cli info server | tr -d '\r' | awk -F: '/^redis_version:/ { print $2 }')
  machine="$cpu, $(nproc) cores; $(basename "$server") $version; $(date -u '+%Y-%m-%d %H:%M UTC')"
  machine+="; load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
}

# Core GCRA is there when COMMAND INFO knows it (an older server replies nil).
has_gcra=0
detect_gcra() {
  local info
  info=$(cli command info gcra)
  if grep -qix gcra <<<"$info"; then has_gcra=1; fi
}

# --- what is measured --------------------------------------------------------

# One entry per command, in parallel arrays (bash has no records). For each:
#   name     the row's label
#   admit    the command for the new and warm paths ("" when it has none);
#            __rand_int__ is the random key, as redis-benchmark spells it
#   deny     the command for the denied path, on one key ("" when none)
#   allowed  the first field of a reply that admits (1, or 0 for the
#            GCRA family, whose first field is "limited"); "" for the
#            Redis references, which do not decide anything
#   warmup   what creates the warm keys, when not admit itself (RL.PEEK
#            creates no key)
#   exhaust  what exhausts the denied key, when not deny itself
names=() admits=() denies=() alloweds=() warmups=() exhausts=()
define() {
  if [ -n "${BENCH_ONLY:-}" ] && ! grep -Eq -- "$BENCH_ONLY" <<<"$1"; then return; fi
  names+=("$1") alloweds+=("$2") admits+=("$3") denies+=("$4")
  warmups+=("${5:-$3}") exhausts+=("${6:-$4}")
}
# define_warm NAME ALLOWED COMMAND WARMUP: a row timed on warm keys only
# (a lease renewed or released needs the key that holds it).
declare -A warm_only=()
define_warm() {
  define "$1" "$2" "$3" "" "$4"
  warm_only[$1]=1
}
# only NAME: whether the row NAME is measured (BENCH_ONLY).
only() { [ -z "${BENCH_ONLY:-}" ] || grep -Eq -- "$BENCH_ONLY" <<<"$1"; }

# Admitting parameters: large enough that no call of the run is refused
# (a warm key takes at most about BENCH_REQUESTS / 1000 units a run), slow
# enough that no key becomes fresh and expires during the run (each unit
# adds 1000 s to a bucket's reset), and the token bucket under 18,446,744
# tokens, where it keeps its narrow 16-byte state. Windows of 10^9 s put the
# next edge of an epoch-aligned window in 2033. Denying parameters: one
# unit, which the exhausting call takes, and nothing back for 10^6 s.
define_commands() {
  local sha now
  sha=$(cli -x script load <lua/token_bucket.lua)
  # The seed's script takes the time from its caller: one fixed time.
  now=$(date +%s.%3N)
  define INCR "" "INCR incr:__rand_int__" ""
  define "SET PX" "" "SET set:__rand_int__ 1 PX 1000000000000" ""
  define GET "" "" "GET get:one" "" "SET get:one 1"
  define "Lua EVALSHA (seed)" 1 "EVALSHA $sha 1 lua:__rand_int__ 1000000 0.001 $now 1" \
    "EVALSHA $sha 1 lua:one 1 0.000001 $now 1"
  if [ "$has_gcra" = 1 ]; then
    define "GCRA (core)" 0 "GCRA gcra:__rand_int__ 100000 1 1000" "GCRA gcra:one 0 1 1000000"
  else
    echo "GCRA left out: $(basename "$server") has no GCRA command"
  fi
  if [ -n "$cell_so" ]; then
    define "$cell_row" 0 "CL.THROTTLE cl:__rand_int__ 100000 1 1000" \
      "CL.THROTTLE cl:one 0 1 1000000"
  fi
  define RL.TOKENBUCKET 1 "RL.TOKENBUCKET tb:__rand_int__ 1000000 0.001 * 1" \
    "RL.TOKENBUCKET tb:one 1 0.000001 * 1"
  define RL.LEAKYBUCKET 1 "RL.LEAKYBUCKET lb:__rand_int__ 1000000 0.001 * 1" \
    "RL.LEAKYBUCKET lb:one 1 0.000001 * 1"
  define RL.FIXEDWINDOW 1 "RL.FIXEDWINDOW fw:__rand_int__ 1000000 1000000000 * 1" \
    "RL.FIXEDWINDOW fw:one 1 1000000000 * 1"
  define RL.SLIDINGWINDOW 1 "RL.SLIDINGWINDOW sw:__rand_int__ 1000000 1000000000 * 1" \
    "RL.SLIDINGWINDOW sw:one 1 1000000000 * 1"
  define RL.SLIDINGLOG 1 "RL.SLIDINGLOG sl:__rand_int__ 1000000 1000000000 * 1" \
    "RL.SLIDINGLOG sl:one 1 1000000000 * 1"
  define RL.THROTTLE 0 "RL.THROTTLE th:__rand_int__ 100000 1 1000" "RL.THROTTLE th:one 0 1 1000000"
  # Leases of 10^9 s, never released: a warm key holds about 500 by the
  # end of a run (O(leases held) a call, as the sliding log's units).
  define RL.ACQUIRE 1 "RL.ACQUIRE cc:__rand_int__ 1000000 1000000000 * 1" \
    "RL.ACQUIRE cc:one 1 1000000 * 1"
  # redis-benchmark draws each __rand_int__ on its own: random pairs of keys.
  define "RL.MULTI (2 limits)" 1 \
    "RL.MULTI 2 ma:__rand_int__ mb:__rand_int__ * TOKENBUCKET 1000000 0.001 1 FIXEDWINDOW 1000000 1000000000 1" \
    "RL.MULTI 2 ma:one mb:one * TOKENBUCKET 1 0.000001 1 FIXEDWINDOW 1 1000000000 1"
  define RL.PEEK 1 "RL.PEEK pk:__rand_int__ TOKENBUCKET 1000000 0.001 * 1" \
    "RL.PEEK pk:one TOKENBUCKET 1 0.000001 * 1" \
    "RL.TOKENBUCKET pk:__rand_int__ 1000000 0.001 * 1" "RL.TOKENBUCKET pk:one 1 0.000001 * 1"
  # The lease and refund commands (RL.RELEASE: each call releases the one
  # lease of a key of its own, __seq__ below).
  define RL.REFUND 1 "RL.REFUND rf:__rand_int__ TOKENBUCKET 1000000 0.001 * 1" "" \
    "RL.TOKENBUCKET rf:__rand_int__ 1000000 0.001 * 1000"
  define_warm RL.RELEASE "" "RL.RELEASE rl:__seq__ 1 *" "RL.ACQUIRE rl:__seq__ 1000000 1000000000 * 1"
  define_warm RL.RENEW 1 "RL.RENEW rn:__rand_int__ 1 1000000000 *" \
    "RL.ACQUIRE rn:__rand_int__ 1000000 1000000000 * 1"
  # Script mode: the same calls through lua/ratelimit.lua, on the same
  # server (its keys are plain strings, so the module plays no part), as
  # the clients make them: FCALL of the library (loaded as they load it)
  # and EVALSHA of the script.
  local sha library
  sha=$(cli -x script load <lua/ratelimit.lua)
  library=ratelimit_${sha:0:12}
  { printf '#!lua name=%s\nlocal RATELIMIT_FUNCTION = %s\n' "$library" "'$library'"
    cat lua/ratelimit.lua; } | cli -x function load >/dev/null
  script_rows FCALL "FCALL $library" "$now"
  script_rows EVALSHA "EVALSHA $sha" "$now"
}

# script_rows FORM CALL NOW: every command of script mode called as CALL
# (the script's keys, then the command and its arguments), with the module
# rows' parameters.
script_rows() {
  local form=$1 call=$2 now=$3 k algorithm
  k=s${form:0:1}
  define "script $form RL.TOKENBUCKET" 1 "$call 1 ${k}tb:__rand_int__ RL.TOKENBUCKET 1000000 0.001 * 1" \
    "$call 1 ${k}tb:one RL.TOKENBUCKET 1 0.000001 * 1"
  # As the seed's script is called: the time given by the caller.
  define "script $form RL.TOKENBUCKET (now given)" 1 \
    "$call 1 ${k}tn:__rand_int__ RL.TOKENBUCKET 1000000 0.001 $now 1" \
    "$call 1 ${k}tn:one RL.TOKENBUCKET 1 0.000001 $now 1"
  define "script $form RL.LEAKYBUCKET" 1 "$call 1 ${k}lb:__rand_int__ RL.LEAKYBUCKET 1000000 0.001 * 1" \
    "$call 1 ${k}lb:one RL.LEAKYBUCKET 1 0.000001 * 1"
  for algorithm in FIXEDWINDOW SLIDINGWINDOW SLIDINGLOG; do
    define "script $form RL.$algorithm" 1 \
      "$call 1 ${k}${algorithm,,}:__rand_int__ RL.$algorithm 1000000 1000000000 * 1" \
      "$call 1 ${k}${algorithm,,}:one RL.$algorithm 1 1000000000 * 1"
  done
  define "script $form RL.MULTI (2 limits)" 1 \
    "$call 2 {${k}m__rand_int__}:a {${k}m__rand_int__}:b RL.MULTI * TOKENBUCKET 1000000 0.001 1 FIXEDWINDOW 1000000 1000000000 1" \
    "$call 2 {${k}mone}:a {${k}mone}:b RL.MULTI * TOKENBUCKET 1 0.000001 1 FIXEDWINDOW 1 1000000000 1"
  define "script $form RL.PEEK" 1 "$call 1 ${k}pk:__rand_int__ RL.PEEK TOKENBUCKET 1000000 0.001 * 1" \
    "$call 1 ${k}pk:one RL.PEEK TOKENBUCKET 1 0.000001 * 1" \
    "$call 1 ${k}pk:__rand_int__ RL.TOKENBUCKET 1000000 0.001 * 1" \
    "$call 1 ${k}pk:one RL.TOKENBUCKET 1 0.000001 * 1"
  define "script $form RL.REFUND" 1 "$call 1 ${k}rf:__rand_int__ RL.REFUND TOKENBUCKET 1000000 0.001 * 1" "" \
    "$call 1 ${k}rf:__rand_int__ RL.TOKENBUCKET 1000000 0.001 * 1000"
  define "script $form RL.ACQUIRE" 1 "$call 1 ${k}cc:__rand_int__ RL.ACQUIRE 1000000 1000000000 * 1" \
    "$call 1 ${k}cc:one RL.ACQUIRE 1 1000000 * 1"
  define_warm "script $form RL.RELEASE" "" "$call 1 ${k}rl:__seq__ RL.RELEASE 1 *" \
    "$call 1 ${k}rl:__seq__ RL.ACQUIRE 1000000 1000000000 * 1"
  define_warm "script $form RL.RENEW" 1 "$call 1 ${k}rn:__rand_int__ RL.RENEW 1 1000000000 *" \
    "$call 1 ${k}rn:__rand_int__ RL.ACQUIRE 1000000 1000000000 * 1"
}

paths=(new warm denied)
declare -A path_title=(
  [new]="new keys" [warm]="1000 warm keys, admitted" [denied]="one key, always denied")

# --- one timed run -------------------------------------------------------------

# cmdstat NAME: "calls usec failed rejected" of one command since RESETSTAT.
# (Redis 7.0 keeps a module command's case in the name: cmdstat_RL.PEEK.)
cmdstat() {
  cli info commandstats | tr -d '\r' | awk -F'[:,=]' -v want="cmdstat_$1" '
    tolower($1) == want { for (i = 2; i < NF; i += 2) f[$i] = $(i + 1)
                 print f["calls"] + 0, f["usec"] + 0, f["failed_calls"] + 0, f["rejected_calls"] + 0 }'
}

# counters NAME: "calls admitted denied" of INFO ratelimit's line for an
# RL.* command (they are not reset by RESETSTAT: compare before and after).
counters() {
  cli info ratelimit | tr -d '\r' | awk -F'[:,=]' -v want="ratelimit_$1" '
    $1 == want { for (i = 2; i < NF; i += 2) f[$i] = $(i + 1)
                 print f["calls"] + 0, f["admitted_units"] + 0, f["denied_units"] + 0 }'
}

# warm_up COMMAND: the command once on each of the keys 0..999 that
# redis-benchmark -r 1000 draws from, then a check that all of them exist.
warm_up() {
  local per_call
  awk -v line="$1" 'BEGIN { for (i = 0; i < 1000; i++) {
      l = line; gsub(/__rand_int__/, sprintf("%012d", i), l); print l } }' \
    | cli >/dev/null
  per_call=$(grep -o __rand_int__ <<<"$1" | wc -l)
  [ "$(cli dbsize)" -eq $((1000 * per_call)) ] || die "warm-up of '$1' left $(cli dbsize) keys"
}

# numbered COMMAND: the command once for each of BENCH_REQUESTS keys, in
# order, __seq__ their number (as redis-benchmark spells __rand_int__), one
# inline command a line for redis-cli --pipe.
numbered() {
  awk -v line="$1" -v n="$requests" 'BEGIN { for (i = 0; i < n; i++) {
      l = line; gsub(/__seq__/, sprintf("%012d", i), l); printf "%s\r\n", l } }'
}

# verdict COMMAND: the first field of one call's reply. A random-key
# command calls a key that the run used (RANDOMKEY: on the new path most of
# the 100000 were never drawn, and a fresh key admits whatever happened).
verdict() {
  local argv number
  number=$(cli randomkey)
  number=${number##*:}
  [[ $number =~ ^[0-9]{12}$ ]] || number=000000000000
  read -ra argv <<<"${1//__rand_int__/$number}"
  cli "${argv[@]}" | head -n 1
}

# run_one INDEX PATH ROUND: prepares the path on a flushed database, times
# the command with redis-benchmark, checks that it admitted or denied as the
# path says, appends a row to the CSV and sets upc to its usec_per_call.
# (Not run in a subshell: its die must end the bench.)
upc=""
run_one() {
  local i=$1 path=$2 round=$3 command prep argv prep_argv range=()
  if [ "$path" = denied ]; then command=${denies[$i]} prep=${exhausts[$i]}
  else command=${admits[$i]} prep=${warmups[$i]}; fi
  read -ra argv <<<"$command"
  read -ra prep_argv <<<"$prep"
  local name=${argv[0],,} counter=""
  [[ $name != rl.* ]] || counter=${name#rl.}

  cli flushall >/dev/null
  case $path in
    new) range=(-r 100000) ;;
    warm) range=(-r 1000); [[ $prep == *__seq__* ]] || warm_up "$prep" ;;
    denied) cli "${prep_argv[@]}" >/dev/null ;;
  esac
  if [[ $command == *__seq__* ]]; then
    cli flushall >/dev/null
    numbered "$prep" | taskset -c "$client_cpu" redis-cli -p "$port" --pipe >/dev/null
    [ "$(cli dbsize)" -eq "$requests" ] || die "'$prep' left $(cli dbsize) keys, not $requests"
  fi
  local before=""
  [ -z "$counter" ] || before=$(counters "$counter")
  # From here on only the timed calls count in commandstats.
  cli config resetstat >/dev/null

  local rps
  if [[ $command == *__seq__* ]]; then
    # One call on each prepared key, in order, pipelined by redis-cli.
    rps=0
    numbered "$command" | taskset -c "$client_cpu" redis-cli -p "$port" --pipe >/dev/null
  else
    rps=$(taskset -c "$client_cpu" redis-benchmark -p "$port" -c "$clients" -P "$pipeline" \
      -n "$requests" "${range[@]}" --csv "${argv[@]}" | awk -F'","' 'NR == 2 { print $2 + 0 }')
  fi

  local calls usec failed rejected
  read -r calls usec failed rejected <<<"$(cmdstat "$name")"
  [ -n "$calls" ] || die "no cmdstat_$name after '$command'"
  [ "$calls" -eq "$requests" ] && [ "$failed" -eq 0 ] && [ "$rejected" -eq 0 ] \
    || die "'$command' ($path): $calls calls of $requests, $failed failed, $rejected rejected"
  check_decisions "$i" "$path" "$command" "$counter" "$before"
  if [[ $command == *__seq__* ]]; then
    # Each call released the one lease of its key, which deletes it.
    [ "$(cli dbsize)" -eq 0 ] || die "'$command': $(cli dbsize) keys left, every one should be released"
  fi

  upc=$(awk -v u="$usec" -v c="$calls" 'BEGIN { printf "%.4f", u / c }')
  echo "$round,${names[$i]},$path,$requests,$calls,$usec,$upc,$rps" >>"$csv"
}

# check_decisions INDEX PATH COMMAND COUNTER BEFORE: fails the bench when
# the path did not decide as it claims. RL.* commands count every unit they
# admit and deny (INFO ratelimit), an exact check of every timed call; for
# the others one more call after the run must still decide the same way.
check_decisions() {
  local i=$1 path=$2 command=$3 counter=$4 before=$5 want=${alloweds[$1]}
  [ -n "$want" ] || return 0
  local expect=admitted
  [ "$path" != denied ] || expect=denied
  if [ -n "$counter" ]; then
    local c0 a0 d0 c1 a1 d1
    read -r c0 a0 d0 <<<"$before"
    read -r c1 a1 d1 <<<"$(counters "$counter")"
    [ $((c1 - c0)) -eq "$requests" ] || die "'$command': INFO ratelimit counted $((c1 - c0)) calls of $requests"
    if [ "$expect" = admitted ]; then
      [ $((d1 - d0)) -eq 0 ] || die "'$command' ($path) denied $((d1 - d0)) units; every call should be admitted"
    else
      [ $((a1 - a0)) -eq 0 ] || die "'$command' ($path) admitted $((a1 - a0)) units; every call should be denied"
    fi
  fi
  local got
  got=$(verdict "$command")
  if [ "$expect" = admitted ]; then
    [ "$got" = "$want" ] || die "'$command' ($path): a call after the run replied $got first, not $want (admitted)"
  else
    [ "$got" != "$want" ] || die "'$command' ($path): a call after the run was admitted"
  fi
}

# --- rounds and the summary ----------------------------------------------------

csv=$out/results.csv
summary=$out/summary.csv

# Every round runs every command on every path before the next round
# starts, so a slow minute of a shared machine lands on one round of many
# commands rather than on every round of one command.
run_rounds() {
  echo "round,command,path,requests,calls,usec,usec_per_call,rps" >"$csv"
  local round i path
  for round in $(seq 1 "$rounds"); do
    for i in "${!names[@]}"; do
      for path in "${paths[@]}"; do
        applies "$i" "$path" || continue
        run_one "$i" "$path" "$round"
        note "round $round/$rounds  ${names[$i]}, ${path_title[$path]}: $upc usec/call"
      done
    done
  done
}
applies() {
  if [ "$2" = denied ]; then [ -n "${denies[$1]}" ]
  elif [ -n "${warm_only[${names[$1]}]:-}" ]; then [ "$2" = warm ]
  else [ -n "${admits[$1]}" ]; fi
}

# summarize: the median and the range of the rounds of every command and
# path, from the CSV, into summary.csv and a Markdown table on stdout.
summarize() {
  local i path
  echo "command,path,median,min,max" >"$summary"
  for i in "${!names[@]}"; do
    for path in "${paths[@]}"; do
      applies "$i" "$path" || continue
      awk -F, -v k="${names[$i]}" -v p="$path" '$2 == k && $3 == p { print $7 }' "$csv" | sort -n \
        | awk -v k="${names[$i]}" -v p="$path" '{ v[NR] = $1 }
            END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                  printf "%s,%s,%.4f,%.4f,%.4f\n", k, p, m, v[1], v[NR] }' >>"$summary"
    done
  done

  echo "usec_per_call, median of $rounds rounds (min-max of the rounds); $requests requests a run,"
  echo "redis-benchmark -c $clients -P $pipeline, server on CPU $server_cpu, client on CPU $client_cpu:"
  echo
  echo "| command | ${path_title[new]} | ${path_title[warm]} | ${path_title[denied]} |"
  echo "|---|---|---|---|"
  local name row cell
  for name in "${names[@]}"; do
    row="| $name |"
    for path in "${paths[@]}"; do
      cell=$(awk -F, -v k="$name" -v p="$path" '$1 == k && $2 == p {
        printf "%.2f (%.2f-%.2f)", $3, $4, $5 }' "$summary")
      row+=" $cell |"
    done
    echo "$row"
  done
}

# goals: each script-mode row's median over the seed's token bucket's on
# the same path, against issue 32's goals (under FCALL 1.5x, RL.MULTI of two
# limits 2x; under EVALSHA 3x).
goals() {
  local seed="Lua EVALSHA (seed)"
  grep -q "^$seed," "$summary" || return 0
  echo "script mode over the seed's token bucket (median over median, same path; * past the goal):"
  echo
  echo "| command | ${path_title[new]} | ${path_title[warm]} | ${path_title[denied]} |"
  echo "|---|---|---|---|"
  awk -F, -v seed="$seed" '
    NR == 1 { next }
    { median[$1, $2] = $3; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
    END {
      for (i = 1; i <= n; i++) {
        name = order[i]
        if (name !~ /^script /) continue
        goal = name ~ /EVALSHA/ ? 3 : (name ~ /MULTI/ ? 2 : 1.5)
        row = "| " name " |"
        split("new warm denied", paths, " ")
        for (p = 1; p <= 3; p++) {
          path = paths[p]
          if (!((name, path) in median)) { row = row " |"; continue }
          base = median[seed, path]
          if (base == "") base = median[seed, "warm"]
          ratio = median[name, path] / base
          row = row sprintf(" %.2fx%s |", ratio, ratio > goal ? " *" : "")
        }
        print row
      }
    }' "$summary"
}

# --- memory ------------------------------------------------------------------------

# bytes NAME LUA: used_memory per key after the Lua body (run for k =
# key:000000000001 ... with i its number) creates $keys keys.
bytes() {
  only "$1" || return 0
  cli flushall >/dev/null
  local before after
  before=$(cli info memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
  cli eval "for i = 1, $keys do local k = 'key:' .. string.format('%012d', i) $2 end" 0 >/dev/null
  [ "$(cli dbsize)" -eq "$keys" ] || die "memory of $1: $(cli dbsize) keys, not $keys"
  after=$(cli info memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
  local per_key
  per_key=$(awk -v a="$after" -v b="$before" -v n="$keys" 'BEGIN { printf "%.1f", (a - b) / n }')
  echo "| $1 | $per_key |"
  echo "$1,$per_key" >>"$out/memory.csv"
}

# The state one admitted call leaves, with the timed runs' admitting
# parameters.
memory() {
  echo "used_memory per key, $keys keys named key:000000000001 ..., after one admitted call each:"
  echo
  echo "| command | bytes per key |"
  echo "|---|---|"
  echo "command,bytes_per_key" >"$out/memory.csv"
  bytes "INCR" "redis.call('INCR', k)"
  bytes "SET PX" "redis.call('SET', k, 1, 'PX', 1000000000000)"
  # What lua/token_bucket.lua leaves after a first call (a script cannot
  # call EVALSHA, so its two writes are spelled out).
  bytes "Lua token bucket (hash + EXPIRE)" \
    "redis.call('HSET', k, 'tokens', 999999, 'last_updated', '1700000000.000') redis.call('EXPIRE', k, 2000000000)"
  if [ "$has_gcra" = 1 ]; then
    bytes "GCRA (core)" "redis.call('GCRA', k, 100000, 1, 1000)"
  fi
  [ -z "$cell_so" ] || bytes "$cell_row" "redis.call('CL.THROTTLE', k, 100000, 1, 1000)"
  bytes RL.TOKENBUCKET "redis.call('RL.TOKENBUCKET', k, 1000000, 0.001, '*', 1)"
  # The largest bucket that keeps 16 bytes of state, and the smallest that
  # needs 24: after one call 18446745 tokens are left, past 64 bits of
  # pico-tokens. (At a rate of 1 a second their keys would expire a second
  # after the call, before the last of a million were created.)
  bytes "RL.TOKENBUCKET capacity 18446744" "redis.call('RL.TOKENBUCKET', k, 18446744, 0.001, '*', 1)"
  bytes "RL.TOKENBUCKET capacity 18446746" "redis.call('RL.TOKENBUCKET', k, 18446746, 0.001, '*', 1)"
  bytes RL.LEAKYBUCKET "redis.call('RL.LEAKYBUCKET', k, 1000000, 0.001, '*', 1)"
  local command
  for command in RL.FIXEDWINDOW RL.SLIDINGWINDOW RL.SLIDINGLOG; do
    bytes "$command" "redis.call('$command', k, 1000000, 1000000000, '*', 1)"
  done
  bytes RL.THROTTLE "redis.call('RL.THROTTLE', k, 100000, 1, 1000)"
  bytes "RL.ACQUIRE (one lease)" "redis.call('RL.ACQUIRE', k, 1000000, 1000000000, '*', 1)"
  # Two keys a call, key:(i) and key:(i + 1) for odd i: the average of a
  # token bucket and a fixed window. (An odd last key gets a call of one
  # limit.)
  bytes "RL.MULTI (per key, 2 keys a call)" "if i % 2 == 1 and i < $keys then
    redis.call('RL.MULTI', 2, k, 'key:' .. string.format('%012d', i + 1), '*',
      'TOKENBUCKET', 1000000, 0.001, 1, 'FIXEDWINDOW', 1000000, 1000000000, 1)
    elseif i % 2 == 1 then
    redis.call('RL.MULTI', 1, k, '*', 'TOKENBUCKET', 1000000, 0.001, 1) end"
  only RL.PEEK && echo "| RL.PEEK | creates no key |"
  bytes_per_key
}

# Each limiter in both modes side by side, and the seed's hash: the same
# calls on the same keys, script mode through lua/ratelimit.lua on a server
# without the module (scripts/bytes-per-key.sh starts its own two servers).
bytes_per_key() {
  [ -z "${BENCH_ONLY:-}" ] || return 0
  echo
  REDIS_SERVER=$server scripts/bytes-per-key.sh "$out/bytes-per-key.csv"
}

# --- one long sliding log -----------------------------------------------------------

# usec COMMAND...: the server's time for one call (commandstats).
usec() {
  cli config resetstat >/dev/null
  cli "$@" >/dev/null
  read -r _ u _ _ <<<"$(cmdstat "$(tr '[:upper:]' '[:lower:]' <<<"$1")")"
  [ -n "$u" ] || die "no commandstats for $1"
  echo "$u"
}

# A log of LONG_RUNS runs, one a microsecond on the server's clock (sent
# pipelined), in a window of 10 s: once it starts to leave the window,
# each admitted call trims about as many runs as it adds.
long_log() {
  local runs=${LONG_RUNS:-1000000} window=10 upc size
  cli flushall >/dev/null
  awk -v n="$runs" -v w="$window" 'BEGIN { for (i = 0; i < n; i++)
      printf "RL.SLIDINGLOG long 9007199254740991 %s * 1\r\n", w }' \
    | taskset -c "$client_cpu" redis-cli -p "$port" --pipe >/dev/null
  size=$(cli memory usage long)
  echo "one sliding log of $runs runs, $size bytes (MEMORY USAGE), a $window s window:"
  echo
  echo "| on the long log | usec |"
  echo "|---|---|"
  # RESTORE of DUMP's payload, both in a script: RESTORE's own time.
  cli config resetstat >/dev/null
  cli eval "redis.call('RESTORE', 'copy', 0, redis.call('DUMP', 'long')) return 1" 0 >/dev/null
  read -r _ restore _ _ <<<"$(cmdstat restore)"
  cli del copy >/dev/null
  echo "| RESTORE (a load) | $restore |"
  echo "| DUMP (a save) | $(usec DUMP long) |"
  echo "| DEBUG DIGEST-VALUE | $(usec DEBUG DIGEST-VALUE long) |"
  echo "| RL.PEEK | $(usec RL.PEEK long SLIDINGLOG 9007199254740991 $window '*' 1) |"
  # Calls from the moment the oldest runs leave: each trims what left
  # since the one before.
  sleep "$window"
  cli config resetstat >/dev/null
  taskset -c "$client_cpu" redis-benchmark -p "$port" -c 1 -P 1 -n 20000 \
    RL.SLIDINGLOG long 9007199254740991 "$window" '*' 1 >/dev/null
  read -r calls usec _ _ <<<"$(cmdstat rl.slidinglog)"
  upc=$(awk -v u="$usec" -v c="$calls" 'BEGIN { printf "%.2f", u / c }')
  echo "| RL.SLIDINGLOG, admitted, trimming ($calls calls) | $upc |"
}

# --- the chart -------------------------------------------------------------------------

# matplotlib in a venv of its own under target/, made on the first run.
chart() {
  local venv=$out/venv
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
    note "installing matplotlib into $venv"
    python3 -m venv "$venv" && "$venv/bin/pip" install -q matplotlib >&2 \
      || { echo "chart not drawn: matplotlib could not be installed into $venv"; return; }
  fi
  "$venv/bin/python" scripts/bench_chart.py "$summary" docs/bench.svg \
    "usec_per_call of each command, median of $rounds interleaved rounds (whiskers: fastest and slowest round)" \
    "$machine; redis-benchmark -c $clients -P $pipeline, $requests requests a run; server and client pinned to a core each"
  echo "chart: docs/bench.svg"
}

# --- main ----------------------------------------------------------------------------------

main() {
  local started=$SECONDS
  if [ "${BENCH_ONLY:-}" = long ]; then
    start_server
    long_log
    return
  fi
  [ -f "$module" ] || die "$module is missing: run make build (make bench does)"
  command -v "$server" >/dev/null || die "no server $server"
  if only "$cell_row"; then find_cell; else echo "CL.THROTTLE (redis-cell) left out: BENCH_ONLY=$BENCH_ONLY"; fi
  start_server
  describe_machine
  detect_gcra
  echo "machine: $machine"
  echo "server: $(command -v "$server")"
  [ -z "$cell_so" ] || echo "CL.THROTTLE: $cell_label"
  define_commands
  echo
  run_rounds
  summarize
  echo
  goals
  echo
  memory
  echo
  if [ -z "${BENCH_ONLY:-}" ]; then long_log; echo; fi
  echo "round-level data: $csv; medians: $summary; memory: $out/memory.csv"
  if [ -z "${BENCH_ONLY:-}" ]; then chart; else echo "chart not redrawn (BENCH_ONLY)"; fi
  echo "took $((SECONDS - started)) s"
}

main
