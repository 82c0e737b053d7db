#!/usr/bin/env bash
# Installs what building and testing need and a fresh Debian machine lacks:
# redis-server and redis-tools (redis-cli, redis-benchmark), libclang
# for redis-module's bindgen, and python3-venv where python3 is Debian's; with WITH_VALGRIND=1 (`make memcheck` sets
# it), valgrind too. Does nothing when all of it is there.
set -euo pipefail

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-benchmark >/dev/null || missing+=(redis-tools)
[ -n "${LIBCLANG_PATH:-}" ] || dpkg -s libclang-dev >/dev/null 2>&1 || missing+=(libclang-dev)
[ "${WITH_VALGRIND:-0}" != 1 ] || command -v valgrind >/dev/null || missing+=(valgrind)
# The Python client's tests make venvs: Debian's own python3 has no venv
# (ensurepip) until python3-venv is installed; pyenv's and others' have it.
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)

if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# With WITH_VALKEY=1 (CI sets it), also Valkey, so the suite runs against
# it too: Debian 12 has it in bookworm-backports, added from the machine's
# own Debian source.
if [ "${WITH_VALKEY:-0}" = 1 ] && ! command -v valkey-server >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  list=/etc/apt/sources.list.d/debian.sources
  backports=/etc/apt/sources.list.d/bookworm-backports.sources
  if [ -f "$list" ] && grep -q bookworm "$list" && [ ! -f "$backports" ]; then
    awk 'BEGIN { RS = ""; ORS = "\n\n" } NR == 1 { sub(/Suites:[^\n]*/, "Suites: bookworm-backports"); print }' \
      "$list" | $sudo tee "$backports" >/dev/null
  fi
  echo "installing: valkey-server"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq -t bookworm-backports valkey-server >/dev/null
  # The package starts a server on 6379 where it can; the tests start their own.
  $sudo service valkey-server stop >/dev/null 2>&1 || true
fi
