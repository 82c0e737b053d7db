#!/usr/bin/env bash
# make cluster: a local Redis Cluster of three primaries on ports 7001-7003,
# each with the module loaded, for trying it out. `scripts/cluster.sh stop`
# (or `make cluster-stop`) stops it and removes its files.
set -euo pipefail
cd "$(dirname "$0")/.."

ports=(7001 7002 7003)
base=${CLUSTER_DIR:-$PWD/target/cluster}

if [ "${1:-start}" = stop ]; then
  for port in "${ports[@]}"; do redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$base"
  echo "cluster stopped"
  exit 0
fi

for port in "${ports[@]}"; do
  mkdir -p "$base/$port"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$base/$port" --daemonize yes \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
    --save "" --appendonly no --logfile "$base/$port/redis.log" \
    --loadmodule "$PWD/target/release/libredis_ratelimit.so"
done
for port in "${ports[@]}"; do
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
done
redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >/dev/null
until redis-cli -p 7001 cluster info | grep -q cluster_state:ok; do sleep 0.1; done
cat <<MSG
A 3-primary Redis Cluster with the module runs on 127.0.0.1:7001-7003. Try:
  redis-cli -c -p 7001 RL.TOKENBUCKET user:42 10 1 '*' 1
  redis-cli -c -p 7001 RL.SLIDINGWINDOW api:7 100 60 '*' 1
Stop it with: make cluster-stop
MSG
