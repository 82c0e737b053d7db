#!/usr/bin/env bash
# Installs what building and testing need and a fresh Debian machine lacks:
# redis-server and redis-tools (redis-cli, redis-benchmark), and libclang
# for redis-module's bindgen. Does nothing when all of it is there.
set -euo pipefail

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-benchmark >/dev/null || missing+=(redis-tools)
[ -n "${LIBCLANG_PATH:-}" ] || dpkg -s libclang-dev >/dev/null 2>&1 || missing+=(libclang-dev)

if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
