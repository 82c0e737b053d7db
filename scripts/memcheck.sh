#!/usr/bin/env bash
# make memcheck: Debian's redis-server with the module, run under valgrind's
# memcheck through a workload of every command, DUMP/RESTORE (corrupt
# payloads included), COPY, RENAME, expiry, DEBUG RELOAD and an AOF rewrite
# without the RDB preamble; then SHUTDOWN NOSAVE, so valgrind writes its leak
# report. Fails on any invalid read or write or use of uninitialised memory
# (in Redis or the module: the module's bugs often show up in Redis's
# frames), on any definitely lost block with a frame in the module, and if
# the server dies. The workload is the `workload_*` functions below: add the
# lines for a new command there.
#
# MEMCHECK_PORT picks the port (default: a free one); MEMCHECK_KEEP=1 keeps
# the logs in their temp dir even when the check passes.
set -euo pipefail
cd "$(dirname "$0")/.."

module=$PWD/target/release/libredis_ratelimit.so
dir=$(mktemp -d -t memcheck.XXXXXX)
server_pid=""

# Debian's redis-server links jemalloc (readelf -d: libjemalloc.so.2), so
# its malloc, free, realloc, calloc and malloc_usable_size are jemalloc's;
# the synonym names the library where valgrind must replace them to see
# that heap (valgrind 3.19 also finds them there unaided, and
# `somalloc=nouserintercepts` shows the opposite: 0 allocations, which the
# verdict refuses). The module allocates through RedisModule_Alloc, so
# through the same functions.
# Leaks do not count for the exit code: Redis's own are not ours to judge,
# and a forked child inherits the parent's heap and leaks, so it would exit
# with --error-exitcode and fail the AOF rewrite. The verdict reads them
# from the log.
valgrind_options=(
  --leak-check=full
  --show-leak-kinds=definite
  --errors-for-leak-kinds=none
  --soname-synonyms='somalloc=libjemalloc.so*'
  --error-exitcode=99
  --num-callers=40
  --log-file="$dir/valgrind.%p.log"
)

free_port() {
  local port
  for port in $(shuf -i 20000-40000 -n 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
  echo "memcheck: no free port found" >&2
  return 1
}
port=${MEMCHECK_PORT:-$(free_port)}

cli() { redis-cli -p "$port" "$@"; }

# Sends the lines read from stdin, one command each in redis-cli's syntax
# ("\x07" escapes in double quotes), and appends the replies to a file to
# look at when something goes wrong. Error replies are expected: each phase
# of the workload is followed by require_alive.
send() { cli >>"$dir/replies.txt" 2>&1 || true; }

# Prints the valgrind stanzas that fail the check, if there are any yet,
# then the verdict, last.
fail() {
  if compgen -G "$dir/valgrind.*.log" >/dev/null; then
    memory_errors
    module_leaks
  fi
  echo "memcheck: FAIL: $*"
  echo "memcheck: logs kept in $dir"
  exit 1
}

# `rdbcompression no`: LZF reads its uninitialised hash table by design
# (Redis's own valgrind.sup suppresses it); without it, an uninitialised
# byte in what the module saves reaches write() and is reported there.
# `crash-memcheck-enabled no`: on a crash, Redis's own memory test would
# fill valgrind's log with invalid reads and writes of its own.
start_server_under_valgrind() {
  valgrind "${valgrind_options[@]}" \
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
      --appendonly yes --aof-use-rdb-preamble no --rdbcompression no \
      --enable-debug-command yes --crash-memcheck-enabled no \
      --logfile "$dir/redis.log" --loadmodule "$module" &
  server_pid=$!
  local tries=0
  until cli ping >/dev/null 2>&1; do
    kill -0 "$server_pid" 2>/dev/null || fail "redis-server did not start (see $dir/redis.log)"
    tries=$((tries + 1))
    [ "$tries" -lt 600 ] || fail "redis-server did not answer within 60 s"
    sleep 0.1
  done
}

require_alive() {
  cli ping >/dev/null 2>&1 || fail "the server died during: $1 (see $dir/redis.log)"
}

# Stops the server, if this script started one that still runs, and removes
# the temp dir unless the check failed or MEMCHECK_KEEP=1.
cleanup() {
  local status=$?
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    cli shutdown nosave >/dev/null 2>&1 || kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ "$status" -eq 0 ] && [ "${MEMCHECK_KEEP:-0}" != 1 ]; then rm -rf "$dir"; fi
}
trap cleanup EXIT


# --- The workload -----------------------------------------------------------

# Every command of the module on keys of every kind, keyspace events on:
# fixed and `*` times, admitted, denied, n = 0 peeks, bad arguments of every
# kind, WRONGTYPE, RL.SETSTATE of every kind (an empty sliding log too),
# RL.LOGAPPLY's changes, good and bad.
workload_commands() {
  send <<'EOF'
CONFIG SET notify-keyspace-events KEA
RL.TOKENBUCKET tb 10 0.001 1000 1
RL.TOKENBUCKET tb 10 0.001 1000 9
RL.TOKENBUCKET tb 10 0.001 1000.25 1
RL.TOKENBUCKET tb 10 0.001 1000.25 11
RL.TOKENBUCKET tb 10 0.001 1000.5 0
RL.TOKENBUCKET tb 5 0.001 1001 1
RL.TOKENBUCKET tb:now 10 1 * 1
RL.TOKENBUCKET tb:now 10 1 * 10
RL.TOKENBUCKET tb:now 10 1 *
RL.TOKENBUCKET tb:peek 10 1 * 0
RL.TOKENBUCKET tb:max 18446744 0.000001 * 18446744
RL.LEAKYBUCKET lb 3 0.001 1000 1
RL.LEAKYBUCKET lb 3 0.001 1000 1
RL.LEAKYBUCKET lb 3 0.001 1000 2
RL.LEAKYBUCKET lb 3 0.001 1000.5 1
RL.LEAKYBUCKET lb 3 0.001 1000.5 0
RL.LEAKYBUCKET lb:now 3 2 * 3
RL.LEAKYBUCKET lb:now 3 2 * 1
RL.LEAKYBUCKET lb:peek 3 2 * 0
RL.FIXEDWINDOW fw 100 3600 1700000050 1
RL.FIXEDWINDOW fw 100 3600 1700000099 99
RL.FIXEDWINDOW fw 100 3600 1700000099.5 1
RL.FIXEDWINDOW fw 100 3600 1700000100 0
RL.FIXEDWINDOW fw:now 2 1 * 2
RL.FIXEDWINDOW fw:now 2 1 * 1
RL.FIXEDWINDOW fw:peek 2 1 * 0
RL.FIXEDWINDOW fw:max 18446744073709551615 1 * 18446744073709551615
RL.SLIDINGWINDOW sw 10 3600 1700000005 8
RL.SLIDINGWINDOW sw 10 3600 1700000012.5 3
RL.SLIDINGWINDOW sw 10 3600 1700000012.5 2
RL.SLIDINGWINDOW sw 10 3600 1700000013 0
RL.SLIDINGWINDOW sw:now 5 0.001 * 5
RL.SLIDINGWINDOW sw:now 5 0.001 * 1
RL.SLIDINGWINDOW sw:peek 5 1 * 0
RL.SLIDINGLOG sl 3 3600 1000 1
RL.SLIDINGLOG sl 3 3600 1004 2
RL.SLIDINGLOG sl 3 3600 1009 1
RL.SLIDINGLOG sl 3 3600 1010 1
RL.SLIDINGLOG sl 3 3600 1010 0
RL.SLIDINGLOG sl 3 3600 1010 4
RL.SLIDINGLOG sl:now 3 1 * 3
RL.SLIDINGLOG sl:now 3 1 * 1
RL.SLIDINGLOG sl:peek 3 1 * 0
RL.SETSTATE set:tb TOKENBUCKET 5000000000000 1700000000000000
RL.SETSTATE set:tb TOKENBUCKET 5000000000000 1700000000000000 PXAT 99999999999999
RL.SETSTATE set:lb LEAKYBUCKET 1000000000000 1700000000000000 PXAT 99999999999999
RL.SETSTATE set:fw FIXEDWINDOW 1700000000000000 7 PXAT 99999999999999
RL.SETSTATE set:sw SLIDINGWINDOW 1700000000000000 3 4 PXAT 99999999999999
RL.SETSTATE set:sl SLIDINGLOG 1700000000000000 1 1700000000000001 2 1700000000500000 3 PXAT 99999999999999
RL.SETSTATE set:sl SLIDINGLOG 1700000000000000 5
RL.SETSTATE set:empty-log SLIDINGLOG PXAT 99999999999999
RL.SETSTATE set:empty-log2 SLIDINGLOG
RL.SETSTATE set:sl PXAT 99999999999999
RL.SETSTATE set:tb TOKENBUCKET 1
RL.SETSTATE set:tb TOKENBUCKET 1 2 3
RL.SETSTATE set:tb TOKENBUCKET x 1
RL.SETSTATE set:tb TOKENBUCKET 1 1 PXAT
RL.SETSTATE set:tb TOKENBUCKET 1 1 PXAT x
RL.SETSTATE set:tb NOSUCHKIND 1 1
RL.SETSTATE set:sl SLIDINGLOG 1700000000000000
RL.SETSTATE set:sl SLIDINGLOG 1700000000000001 1 1700000000000000 1
RL.SETSTATE set:sl SLIDINGLOG 1700000000000000 0
RL.SETSTATE set:sl SLIDINGLOG 1700000000000000 18446744073709551615 1700000000000001 18446744073709551615
RL.LOGAPPLY set:sl APPEND 0 1700000000600000 2 PXAT 99999999999999
RL.LOGAPPLY set:sl APPEND 1700000000500001 1700000000700000 1 PXAT 99999999999999
RL.LOGAPPLY set:sl REMOVE 0 2 PXAT 99999999999999
RL.LOGAPPLY set:new-log APPEND 0 1700000000000000 3 PXAT 99999999999999
RL.LOGAPPLY set:missing REMOVE 0 1 PXAT 99999999999999
RL.LOGAPPLY set:sl APPEND 0 1 1 PXAT 99999999999999
RL.LOGAPPLY set:sl APPEND 0 1700000000700000 0 PXAT 99999999999999
RL.LOGAPPLY set:sl APPEND 0 1700000000700000 9007199254740991 PXAT 99999999999999
RL.LOGAPPLY set:sl REMOVE x 1 PXAT 99999999999999
RL.LOGAPPLY set:sl APPEND 0 1 1 EX 1
RL.LOGAPPLY set:tb APPEND 0 1700000000000000 1 PXAT 99999999999999
RL.SETSTATE set:sw TOKENBUCKET 1 1
RL.SETSTATE
RL.SETSTATE set:x
RL.TOKENBUCKET
RL.TOKENBUCKET tb
RL.TOKENBUCKET tb 10 1
RL.TOKENBUCKET tb 10 1 * 1 extra
RL.TOKENBUCKET tb 0 1 * 1
RL.TOKENBUCKET tb 18446745 1 * 1
RL.TOKENBUCKET tb NaN 1 * 1
RL.TOKENBUCKET tb 10 inf * 1
RL.TOKENBUCKET tb 10 1e3 * 1
RL.TOKENBUCKET tb 10 -1 * 1
RL.TOKENBUCKET tb 10 0 * 1
RL.TOKENBUCKET tb 10 0.0000001 * 1
RL.TOKENBUCKET tb 10 1 -1 1
RL.TOKENBUCKET tb 10 1 "" 1
RL.TOKENBUCKET tb 10 1 " 1" 1
RL.TOKENBUCKET tb 10 0.001 1e400 1
RL.TOKENBUCKET tb 10 1 ** 1
RL.TOKENBUCKET tb 10 1 * -1
RL.TOKENBUCKET tb 10 1 * 1.5
RL.TOKENBUCKET tb 10 1 * 99999999999999999999999
RL.TOKENBUCKET tb 10 1 "\xc3\xa9" 1
RL.TOKENBUCKET tb 10 1 "1\x001" 1
RL.LEAKYBUCKET lb 0 1 * 1
RL.LEAKYBUCKET lb 3 x * 1
RL.LEAKYBUCKET lb 3 2 * x
RL.FIXEDWINDOW fw 0 60 * 1
RL.FIXEDWINDOW fw 18446744073709551616 60 * 1
RL.FIXEDWINDOW fw 1 0.0001 * 1
RL.FIXEDWINDOW fw 1 1..0 * 1
RL.SLIDINGWINDOW sw 1 0 * 1
RL.SLIDINGWINDOW sw 1 60 1.2.3 1
RL.SLIDINGLOG sl 0 10 * 1
RL.SLIDINGLOG sl 3 -10 * 1
RL.SLIDINGLOG sl 3 10 * ""
RL.SLIDINGLOG sl 3
SET string 1
LPUSH list 1
HSET hash f 1
SADD set 1
ZADD zset 1 m
XADD stream * f 1
RL.TOKENBUCKET string 10 1 * 1
RL.LEAKYBUCKET list 10 1 * 1
RL.FIXEDWINDOW hash 10 1 * 1
RL.SLIDINGWINDOW set 10 1 * 1
RL.SLIDINGLOG zset 10 1 * 1
RL.SETSTATE stream TOKENBUCKET 1 1
RL.TOKENBUCKET lb 10 1 * 1
RL.LEAKYBUCKET fw 10 1 * 1
RL.FIXEDWINDOW sw 10 1 * 1
RL.SLIDINGWINDOW sl 10 1 * 1
RL.SLIDINGLOG tb 10 1 * 1
RL.SLIDINGLOG tb 10 1 * 0
RL.TOKENBUCKET sl 10 1 * 0
INFO ratelimit
COMMAND DOCS RL.TOKENBUCKET RL.LEAKYBUCKET RL.FIXEDWINDOW RL.SLIDINGWINDOW RL.SLIDINGLOG RL.SETSTATE
COMMAND INFO RL.TOKENBUCKET RL.LEAKYBUCKET RL.FIXEDWINDOW RL.SLIDINGWINDOW RL.SLIDINGLOG RL.SETSTATE
COMMAND GETKEYS RL.SLIDINGLOG sl 3 10 * 1
EOF
}

# Sliding logs of many runs: a call every millisecond for 3 s into a 0.5 s
# window (every call after the first 500 trims the oldest run), into a 3600 s
# window (a log of 3000 runs that lives on through DUMP, RELOAD and the AOF;
# n from 0 to 6, so peeks too), and into a 60 s window that one late call
# trims to a single run; denials on a full log; the server's clock.
workload_long_sliding_logs() {
  {
    local i at
    for i in $(seq 0 2999); do
      at=$(printf '%d.%03d' $((1000 + i / 1000)) $((i % 1000)))
      echo "RL.SLIDINGLOG log:trimmed 100000 0.5 $at 1"
      echo "RL.SLIDINGLOG log:long 100000 3600 $at $((i % 7))"
      echo "RL.SLIDINGLOG log:emptied 100000 60 $at 1"
    done
    echo "RL.SLIDINGLOG log:emptied 100000 60 5000 1"
    for i in $(seq 1 200); do echo "RL.SLIDINGLOG log:full 100 3600 * 1"; done
    for i in $(seq 1 200); do echo "RL.SLIDINGLOG log:now 1000000 0.05 * 3"; done
    echo "MEMORY USAGE log:trimmed"
    echo "MEMORY USAGE log:long"
    echo "MEMORY USAGE log:emptied"
  } | send
}

# Every key through Redis's own commands that copy, move, measure, digest,
# expire and delete values.
workload_keyspace() {
  send <<'EOF'
MEMORY USAGE tb
MEMORY USAGE lb
MEMORY USAGE fw
MEMORY USAGE sw
MEMORY USAGE sl
MEMORY USAGE set:empty-log
DEBUG DIGEST-VALUE tb lb fw sw sl log:long log:emptied set:empty-log
DEBUG DIGEST
COPY tb copy:tb
COPY lb copy:lb
COPY fw copy:fw
COPY sw copy:sw
COPY sl copy:sl
COPY log:long copy:log:long
COPY set:empty-log copy:empty-log
COPY tb copy:sl REPLACE
COPY log:trimmed copy:tb REPLACE
RENAME copy:lb renamed:lb
RENAME copy:fw renamed:lb
RENAME copy:sw copy:sl
EXPIRE renamed:lb 1000
PEXPIRE copy:sl 1
PERSIST copy:tb
TYPE copy:tb
DEL copy:empty-log
UNLINK copy:log:long copy:tb
EOF
  sleep 0.2
  send <<<"EXISTS copy:sl"
}

# DUMP and RESTORE (REPLACE onto the key itself and onto a new key) of
# every ratelimit key, the payload passed back as redis-cli prints it.
workload_dump_restore() {
  local key
  for key in $(cli --scan); do
    [ "$(cli type "$key")" = ratelimit ] || continue
    local payload
    payload=$(cli --no-raw dump "$key") || fail "DUMP $key failed"
    printf 'RESTORE restored:%s 0 %s REPLACE\nRESTORE %s 0 %s REPLACE\n' \
      "$key" "$payload" "$key" "$payload" | send
  done
}

# Payloads with a valid CRC and RDB version, so Redis hands them to the
# module (and bad_crc, which Redis refuses itself). Each must get an error
# and create no key. Module id adab5e9629a2b4 is `ratelimit`; the byte after
# it the encoding version; module data is opcode 02 (unsigned) or 05
# (string) then the value, 00 ends it; then RDB version 0a 00 and CRC-64.
declare -A corrupt_payloads=(
  [bad_crc]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x01\x02\x81\x00\x00\x08\x2f\x79\xcd\x90\x00\x02\x80\x3b\x9a\xca\x00\x00\x0a\x00\xeb\xab\x3b\x9c\x7a\x2f\xa8\x00"'
  [kind_0]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x00\x02\x81\x00\x00\x08\x2f\x79\xcd\x90\x00\x02\x80\x3b\x9a\xca\x00\x00\x0a\x00\xcd\x50\x07\x5b\xdb\x9d\xdd\x8c"'
  [kind_6]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x06\x02\x81\x00\x00\x08\x2f\x79\xcd\x90\x00\x02\x80\x3b\x9a\xca\x00\x00\x0a\x00\x72\xd9\x1a\x91\x4c\x14\xb9\xe6"'
  [kind_2_pow_64_minus_1]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x81\xff\xff\xff\xff\xff\xff\xff\xff\x02\x81\x00\x00\x08\x2f\x79\xcd\x90\x00\x02\x80\x3b\x9a\xca\x00\x00\x0a\x00\x9c\xe9\x2d\x56\x12\xbd\xd1\x12"'
  [encoding_version_0]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x00\x02\x01\x02\x81\x00\x00\x08\x2f\x79\xcd\x90\x00\x02\x80\x3b\x9a\xca\x00\x00\x0a\x00\x11\x77\xbe\xb8\xd0\x30\x1f\x46"'
  [encoding_version_5]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x05\x02\x01\x02\x81\x00\x00\x08\x2f\x79\xcd\x90\x00\x02\x80\x3b\x9a\xca\x00\x00\x0a\x00\xf3\xb3\x60\xbb\x02\xa6\x73\x6d"'
  [kind_8_at_encoding_3]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x03\x02\x08\x02\x81\x00\x00\x08\x2f\x79\xcd\x90\x00\x02\x80\x3b\x9a\xca\x00\x00\x0a\x00\x3d\xd2\x1a\x99\xf5\xed\xc0\xa7"'
  [log_total_wrong]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x05\x02\x80\x3b\x9a\xca\x00\x02\x80\x3b\xaa\x0c\x40\x02\x04\x05\x09\x03\x05\x06\x00\x01\xc0\x84\x3d\x02\x00\x0a\x00\x95\x36\xc9\xbf\xaa\xda\xf8\xee"'
  [log_last_wrong]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x05\x02\x80\x3b\x9a\xca\x00\x02\x80\x3b\xb9\x4e\x80\x02\x03\x05\x09\x03\x05\x06\x00\x01\xc0\x84\x3d\x02\x00\x0a\x00\x4a\xad\x2d\x2d\x0b\xbf\x08\xab"'
  [log_runs_garbage]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x05\x02\x80\x3b\x9a\xca\x00\x02\x80\x3b\xaa\x0c\x40\x02\x03\x05\x14\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00\x0a\x00\xc6\x42\x1a\xef\xdd\x9f\x55\xad"'
  [log_runs_empty_total_3]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x05\x02\x80\x3b\x9a\xca\x00\x02\x80\x3b\xaa\x0c\x40\x02\x03\x05\x00\x00\x0a\x00\x16\x09\xc2\xbf\xb3\x48\x7f\x35"'
  [extra_field_before_eof]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x01\x02\x81\x00\x00\x08\x2f\x79\xcd\x90\x00\x02\x80\x3b\x9a\xca\x00\x02\x07\x00\x0a\x00\x66\x3a\x99\x36\x46\x6a\xe2\x17"'
  [no_eof]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x01\x02\x81\x00\x00\x08\x2f\x79\xcd\x90\x00\x02\x80\x3b\x9a\xca\x00\x0a\x00\xe6\xe5\x70\xe4\xde\x83\x1d\x25"'
)

# Module data that ends early or carries a wrong opcode: on a module that
# does not declare REDISMODULE_OPTIONS_HANDLE_IO_ERRORS these abort the
# whole server (issue 8, item 1).
declare -A truncated_payloads=(
  [empty_module_data]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x0a\x00\x92\x34\x97\x5c\xb3\xff\x2f\x43"'
  [token_bucket_missing_a_field]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x01\x02\x81\x00\x00\x08\x2f\x79\xcd\x90\x00\x00\x0a\x00\x6a\xe5\x03\x69\xa8\x12\xdb\x3e"'
  [kind_only]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x01\x00\x0a\x00\x84\xcf\x89\x67\x00\x00\x81\xeb"'
  [log_missing_runs]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x05\x02\x80\x3b\x9a\xca\x00\x02\x80\x3b\xaa\x0c\x40\x02\x03\x00\x0a\x00\x78\x26\xf2\x29\x5a\x9b\x11\x29"'
  [kind_as_string_opcode]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x05\x01\x01\x02\x81\x00\x00\x08\x2f\x79\xcd\x90\x00\x02\x80\x3b\x9a\xca\x00\x00\x0a\x00\x29\x77\xe4\x36\xd7\x9e\xee\xf6"'
  [log_runs_as_unsigned_opcode]='"\x07\x81\xad\xab\x5e\x96\x29\xa2\xb4\x02\x02\x05\x02\x80\x3b\x9a\xca\x00\x02\x80\x3b\xaa\x0c\x40\x02\x03\x02\x03\x00\x0a\x00\x2d\x2c\xae\xb1\xf6\x6e\x1b\x00"'
)

# restore_must_be_refused NAME PAYLOAD: RESTORE answers an error and
# creates no key.
restore_must_be_refused() {
  local reply
  reply=$(cli <<<"RESTORE corrupt:$1 0 $2" 2>&1) || true
  require_alive "RESTORE of the corrupt payload $1"
  case $reply in ERR* | WRONGTYPE* | BUSYKEY*) ;; *) fail "RESTORE of $1 was not refused: $reply" ;; esac
  [ "$(cli exists "corrupt:$1")" = 0 ] || fail "RESTORE of $1 created a key"
}

workload_corrupt_restore() {
  local name
  for name in "${!corrupt_payloads[@]}"; do
    restore_must_be_refused "$name" "${corrupt_payloads[$name]}"
  done
  for name in "${!truncated_payloads[@]}"; do
    restore_must_be_refused "$name" "${truncated_payloads[$name]}"
  done
}

# The composable limits: RL.MULTI, RL.PEEK, RL.REFUND.
workload_composable_limits() {
  send <<'EOF'
RL.MULTI 2 multi:{u}:a multi:{u}:b 1000 TOKENBUCKET 10 1 1 SLIDINGLOG 5 60 1
RL.MULTI 2 multi:{u}:a multi:{u}:b 1000 TOKENBUCKET 10 1 9 SLIDINGLOG 5 60 4
RL.MULTI 2 multi:{u}:a multi:{u}:b 1000 TOKENBUCKET 10 1 1 SLIDINGLOG 5 60 1
RL.MULTI 2 multi:{u}:a multi:{u}:b * TOKENBUCKET 10 1 0 SLIDINGLOG 5 60 0
RL.MULTI 5 m:tb m:lb m:fw m:sw m:sl * TOKENBUCKET 10 1 1 LEAKYBUCKET 3 2 1 FIXEDWINDOW 5 60 1 SLIDINGWINDOW 5 60 1 SLIDINGLOG 5 60 1
RL.MULTI 2 m:tb m:tb * TOKENBUCKET 10 1 1 TOKENBUCKET 10 1 1
RL.MULTI 1 string * TOKENBUCKET 10 1 1
RL.MULTI 1 m:tb * SLIDINGLOG 10 1 1
RL.MULTI 0 * TOKENBUCKET 10 1 1
RL.MULTI 2 m:tb * TOKENBUCKET 10 1 1
RL.MULTI 1 m:tb * NOSUCH 10 1 1
RL.MULTI 1 m:tb * TOKENBUCKET 0 1 1
RL.MULTI 1 m:tb * TOKENBUCKET 10 1
RL.MULTI x m:tb * TOKENBUCKET 10 1 1
EOF
  send <<'EOF'
RL.PEEK tb TOKENBUCKET 10 1 *
RL.PEEK lb LEAKYBUCKET 3 2 * 2
RL.PEEK fw FIXEDWINDOW 100 60 * 1
RL.PEEK sw SLIDINGWINDOW 10 10 * 1
RL.PEEK log:long SLIDINGLOG 100000 3600 * 1
RL.PEEK peek:missing SLIDINGLOG 5 60 * 1
RL.PEEK tb SLIDINGLOG 5 60 * 1
RL.PEEK string TOKENBUCKET 10 1 * 1
RL.PEEK tb TOKENBUCKET 10 1 * x
RL.PEEK tb NOSUCH 10 1 *
EOF
  send <<'EOF'
RL.TOKENBUCKET refund:tb 10 1 * 5
RL.REFUND refund:tb TOKENBUCKET 10 1 * 3
RL.REFUND refund:tb TOKENBUCKET 10 1 * 100
RL.LEAKYBUCKET refund:lb 3 2 * 2
RL.REFUND refund:lb LEAKYBUCKET 3 2 * 1
RL.FIXEDWINDOW refund:fw 10 60 * 4
RL.REFUND refund:fw FIXEDWINDOW 10 60 * 2
RL.SLIDINGWINDOW refund:sw 10 60 * 4
RL.REFUND refund:sw SLIDINGWINDOW 10 60 * 9
RL.SLIDINGLOG refund:sl 10 60 1000 2
RL.SLIDINGLOG refund:sl 10 60 1001 3
RL.REFUND refund:sl SLIDINGLOG 10 60 1002 4
RL.REFUND log:long SLIDINGLOG 100000 3600 5000 1
RL.REFUND refund:missing TOKENBUCKET 10 1 * 1
RL.REFUND string TOKENBUCKET 10 1 * 1
RL.REFUND refund:tb SLIDINGLOG 10 60 * 1
RL.REFUND refund:tb TOKENBUCKET 10 1 * x
RL.REFUND refund:tb TOKENBUCKET 10 1 *
EOF
}

# RL.THROTTLE, redis-cell's CL.THROTTLE in our data type (the server is
# not started with the CL.THROTTLE argument, so that name stays unknown).
workload_throttle() {
  send <<'EOF'
RL.THROTTLE throttle:a 5 10 60
RL.THROTTLE throttle:a 5 10 60 6
RL.THROTTLE throttle:a 5 10 60 7
RL.THROTTLE throttle:a 5 10 60 0
RL.THROTTLE throttle:b 0 1 1 1
RL.THROTTLE throttle:b 0 1 1 1
RL.THROTTLE throttle:a -1 10 60
RL.THROTTLE throttle:a 5 0 60
RL.THROTTLE throttle:a 5 10 0
RL.THROTTLE throttle:a 5 10 60 x
RL.THROTTLE throttle:a 5 10
RL.THROTTLE string 5 10 60
RL.THROTTLE tb 5 10 60
RL.SETSTATE throttle:c THROTTLE 4102444800000000000 PXAT 4102444800000
RL.SETSTATE throttle:c THROTTLE 0
CL.THROTTLE throttle:a 5 10 60
DUMP throttle:a
COPY throttle:a throttle:copy
MEMORY USAGE throttle:a
DEBUG DIGEST-VALUE throttle:a
EOF
}

# DEBUG RELOAD saves and loads the RDB; BGREWRITEAOF (no RDB preamble)
# writes every key as RL.SETSTATE in a forked child, also under valgrind,
# and DEBUG LOADAOF replays it.
workload_reload_and_aof_rewrite() {
  [ "$(cli debug reload)" = OK ] || fail "DEBUG RELOAD did not answer OK"
  cli bgrewriteaof >/dev/null || fail "BGREWRITEAOF was refused"
  until cli info persistence | grep -q '^aof_rewrite_in_progress:0' &&
    cli info persistence | grep -q '^aof_rewrite_scheduled:0'; do
    require_alive "BGREWRITEAOF"
    sleep 0.2
  done
  # After a valgrind error, the forked child exits with --error-exitcode.
  cli info persistence | grep -q '^aof_last_bgrewrite_status:ok' ||
    fail "BGREWRITEAOF failed (after a memory error its child exits with valgrind's error code)"
  [ "$(cli debug loadaof)" = OK ] || fail "DEBUG LOADAOF did not answer OK"
  require_alive "DEBUG LOADAOF"
  send <<<"DEBUG DIGEST"
}

# Concurrency limits: leases taken, renewed, released (the last one deletes
# the key), as replicas receive them, in RL.MULTI and RL.PEEK; keys of
# hundreds of leases (their AOF rewrite spans several commands), growing
# and shrinking.
workload_leases() {
  send <<'EOF2'
RL.ACQUIRE cc 3 60 1000 1
RL.ACQUIRE cc 3 60 1001 2
RL.ACQUIRE cc 3 60 1002 1
RL.ACQUIRE cc 3 60 1002 4
RL.ACQUIRE cc 3 60 1002 0
RL.RENEW cc 1 120 1003
RL.RENEW cc 9 120 1003
RL.RELEASE cc 2 1004
RL.RELEASE cc 2 1004
RL.ACQUIRE cc:now 2 0.05 * 2
RL.ACQUIRE cc:now 2 0.05 * 1
RL.RELEASE cc:gone 1 1000
RL.ACQUIRE cc:last 1 10 1000 1
RL.RELEASE cc:last 1 1000
RL.SETSTATE cc:set CONCURRENCY 1000000000 5 1 2000000000 1 4 3000000000 2 PXAT 32503680000000
RL.SETSTATE cc:set CONCURRENCY 1000000000 5 4 3000000000 0
RL.LEASEAPPLY cc:set ACQUIRE 1500000000 5 2500000000 1 PXAT 32503680000000
RL.LEASEAPPLY cc:set RENEW 1600000000 1 2600000000 PXAT 32503680000000
RL.LEASEAPPLY cc:set RELEASE 1700000000 4
RL.LEASEAPPLY cc:set RELEASE 1700000000 4
RL.LEASEAPPLY cc:applied ACQUIRE 1 1 2 1
RL.LEASEAPPLY cc:applied RELEASE 1 1
RL.MULTI 2 {m}:cc {m}:tb 1000 CONCURRENCY 2 60 1 TOKENBUCKET 1 0.001 1
RL.MULTI 2 {m}:cc {m}:tb 1000 CONCURRENCY 2 60 1 TOKENBUCKET 1 0.001 1
RL.PEEK cc CONCURRENCY 3 60 1004 2
RL.PEEK cc:none CONCURRENCY 3 60 * 1
RL.REFUND cc CONCURRENCY 3 60 1004 1
RL.ACQUIRE string 3 60 * 1
RL.RELEASE tb 1 *
EOF2
  {
    local i
    for i in $(seq 1 300); do echo "RL.ACQUIRE cc:many 1000 3600 * 1"; done
    for i in $(seq 1 2 300); do echo "RL.RELEASE cc:many $i *"; done
    for i in $(seq 1 400); do echo "RL.ACQUIRE cc:churn 1000 0.02 * 1"; done
    echo "MEMORY USAGE cc:many"
    echo "COPY cc:many cc:copy"
  } | send
}

run_workload() {
  workload_commands
  require_alive "the commands"
  workload_long_sliding_logs
  require_alive "the long sliding logs"
  workload_leases
  require_alive "RL.ACQUIRE, RL.RELEASE, RL.RENEW, RL.LEASEAPPLY"
  workload_keyspace
  require_alive "COPY, RENAME, EXPIRE, DEL"
  workload_dump_restore
  require_alive "DUMP and RESTORE"
  workload_corrupt_restore
  workload_composable_limits
  require_alive "RL.MULTI, RL.PEEK, RL.REFUND"
  workload_throttle
  require_alive "RL.THROTTLE"
  workload_reload_and_aof_rewrite
  workload_commands
  require_alive "the commands, after the reloads"
}

# --- The verdict ------------------------------------------------------------

# Prints the stanzas of valgrind's logs (the server's and its forked
# children's) that match an awk condition, without the ==pid== prefixes.
valgrind_stanzas() {
  sed -E 's/^==[0-9]+== ?//' "$dir"/valgrind.*.log | awk -v RS= -v ORS='\n\n' "$1"
}

memory_errors() {
  valgrind_stanzas '/Invalid (read|write|free)|uninitialised|Mismatched free|overlap|fishy/'
}
module_leaks() {
  valgrind_stanzas '/definitely lost in loss record/ && /libredis_ratelimit\.so|redis_ratelimit::/'
}

count_stanzas() { awk -v RS= 'END { print NR }'; }

stop_server_and_judge() {
  # valgrind runs as the process it starts: its pid is the server's.
  local server_log=$dir/valgrind.$server_pid.log status=0
  cli shutdown nosave >/dev/null 2>&1 || true
  wait "$server_pid" || status=$?
  server_pid=""
  case $status in
    0) ;;
    99) fail "valgrind found memory errors (it exited with --error-exitcode; see $server_log)" ;;
    *) fail "redis-server under valgrind exited with status $status (see $dir/redis.log)" ;;
  esac
  grep -q 'LEAK SUMMARY\|All heap blocks were freed' "$server_log" ||
    fail "valgrind wrote no leak report: the server did not exit cleanly"
  local allocs
  allocs=$(sed -nE 's/.*total heap usage: ([0-9,]+) allocs.*/\1/p' "$server_log" | tr -d ,)
  [ "${allocs:-0}" -gt 0 ] || fail "valgrind saw no allocation: it did not intercept jemalloc's malloc"

  local errors leaks children
  errors=$(memory_errors | count_stanzas)
  leaks=$(module_leaks | count_stanzas)
  [ "$errors" -eq 0 ] && [ "$leaks" -eq 0 ] ||
    fail "$errors memory errors, $leaks definitely lost records with a frame in the module"
  children=$(($(ls "$dir"/valgrind.*.log | wc -l) - 1))
  echo "memcheck: PASS: no invalid read or write, no uninitialised value, no block definitely lost" \
    "in the module; $allocs allocations seen; $children forked child(ren) checked too"
}

command -v valgrind >/dev/null || fail "valgrind is missing: WITH_VALGRIND=1 scripts/install-deps.sh installs it"
[ -f "$module" ] || fail "$module is missing: cargo build --release"
started=$SECONDS
start_server_under_valgrind
run_workload
stop_server_and_judge
echo "memcheck: $((SECONDS - started)) s under valgrind"
