#!/usr/bin/env bash
# Starts or stops the local cluster described in README.md beside this file.
#   cluster.sh start   # returns once every process serves
#   cluster.sh stop
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin/sluice}
RUN=data/local-cluster
CFG=configs/local-cluster
mkdir -p "$RUN"

wait_http() { # url timeout_s
  local deadline=$((SECONDS + $2))
  until curl -fsS -o /dev/null "$1" 2>/dev/null; do
    if ((SECONDS > deadline)); then echo "timed out waiting for $1" >&2; return 1; fi
    sleep 0.2
  done
}

start_one() { # name
  local name=$1
  if [[ -f $RUN/$name.pid ]] && kill -0 "$(cat "$RUN/$name.pid")" 2>/dev/null; then
    echo "$name already running"; return
  fi
  nohup "$BIN" serve --config "$CFG/$name.yaml" --log-format json >>"$RUN/$name.log" 2>&1 &
  echo $! >"$RUN/$name.pid"
}

case "${1:-}" in
start)
  for i in 1 2 3; do start_one meta-$i; done
  for i in 1 2 3; do wait_http "http://127.0.0.1:966$i/readyz" 30; done
  for i in 1 2 3; do start_one write-$i; done
  for i in 1 2; do start_one read-$i; done
  for port in 9644 9645 9646 9647 9648; do wait_http "http://127.0.0.1:$port/readyz" 60; done
  echo "cluster serving: write 127.0.0.1:9092-9094, read 127.0.0.1:9192-9193, mixed 127.0.0.1:9292-9296 (logs in $RUN)"
  ;;
stop)
  for f in "$RUN"/*.pid; do
    [[ -e $f ]] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
  done
  for f in "$RUN"/*.pid; do
    [[ -e $f ]] || continue
    pid=$(cat "$f")
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
  echo "cluster stopped"
  ;;
*)
  echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
