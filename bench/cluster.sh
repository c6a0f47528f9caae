#!/usr/bin/env bash
# Figures of the local cluster (configs/local-cluster: 3 meta, 3 write and
# 2 read brokers, each its own process on loopback), as issue 5 asks for:
#   1. acks=all produce throughput at saturation (idempotent, 4 producers,
#      6 partitions, replication factor 3, raft mode) and its ack latency;
#   2. ack and end-to-end latency at a fixed 10,000 records/s (consumer on
#      a read listener);
#   3. consumer throughput from the read listeners with two read brokers,
#      then with one (read-2 stopped): every partition of the topic of (1)
#      read from the start by one kcat per partition, in parallel.
# Failover times come from `make test-faults` (cmd/sluice cluster tests
# print them); the CPU of 1,000 idle partitions from
# `go test ./replica/ -run TestRaftIdleCPU -v -count=1`.
#
# Starts from an empty cluster (data/local-cluster is wiped) and stops it at
# the end. Every run is bounded in time. Needs kcat, curl and python3.
#   bash bench/cluster.sh [seconds-per-produce-run]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-15}
RUN=data/local-cluster
WRITE=127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094
READ=127.0.0.1:9192,127.0.0.1:9193

for tool in kcat curl python3; do
  command -v "$tool" >/dev/null || { echo "bench/cluster.sh needs $tool" >&2; exit 1; }
done
make -s build
go build -o bin/sluice-bench ./cmd/sluice-bench

configs/local-cluster/cluster.sh stop >/dev/null 2>&1 || true
rm -rf "$RUN"
configs/local-cluster/cluster.sh start
trap 'configs/local-cluster/cluster.sh stop >/dev/null 2>&1 || true' EXIT

# One line of the generator's JSON result: what this script reports.
summary() {
  python3 -c '
import json, sys
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    p, c = r["produce"], r["consume"]
    a, e = p["ack_latency"], c["e2e_latency"]
    out = "produce %.0f records/s = %.1f MB/s, ack p50 %.1f ms p99 %.1f ms p99.9 %.1f ms, errors %d" % (
        p["records_per_s"], p["mb_per_s"], a["p50_ms"], a["p99_ms"], a["p999_ms"], p["errors"])
    if e["count"]:
        out += "; end-to-end p50 %.1f ms p99 %.1f ms p99.9 %.1f ms, missing %d" % (
            e["p50_ms"], e["p99_ms"], e["p999_ms"], c["missing"])
    print(out)
'
}

echo "== 1. acks=all at saturation: 4 idempotent producers, 6 partitions x 3 voters, ${DUR}s"
bin/sluice-bench -brokers "$WRITE" -topic cluster-sat -partitions 6 -replication 3 \
  -producers 4 -consumers 0 -duration "${DUR}s" -warmup 3s -quiet | summary

echo "== 2. acks=all at 10,000 records/s with end-to-end latency, ${DUR}s"
# Seeded on the mixed listeners: the producer writes to the raft leaders and
# the consumer (franz-go fetches from follower replicas, KIP-392) is sent to
# the read brokers, so the end-to-end figure includes replication to them.
bin/sluice-bench -brokers 127.0.0.1:9292,127.0.0.1:9293,127.0.0.1:9294 -topic cluster-rate \
  -partitions 6 -replication 3 -producers 1 -consumers 1 -rate 10000 -duration "${DUR}s" -warmup 3s -quiet | summary
echo "-- record bytes each broker returned to fetchers of that topic (write brokers should be ~0):"
for port in 9644 9645 9646 9647 9648; do
  printf '%s ' "admin $port:"
  curl -fsS "http://127.0.0.1:$port/metrics" | awk '/^sluice_fetched_bytes_total\{.*topic="cluster-rate"/ {s += $NF} END {printf "%.0f bytes\n", s + 0}'
done

consume_all() { # label
  local label=$1 parts=6 start end bytes
  start=$(date +%s.%N)
  local pids=() files=()
  for ((p = 0; p < parts; p++)); do
    local f
    f=$(mktemp)
    files+=("$f")
    timeout 120 kcat -C -b "$READ" -t cluster-sat -p "$p" -o beginning -e -q -f '%S\n' >"$f" 2>/dev/null &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  end=$(date +%s.%N)
  bytes=$(cat "${files[@]}" | awk '{s += $1} END {print s + 0}')
  rm -f "${files[@]}"
  awk -v b="$bytes" -v s="$start" -v e="$end" -v l="$label" \
    'BEGIN {printf "%s: %.0f MB in %.1f s = %.0f MB/s\n", l, b / 1e6, e - s, b / 1e6 / (e - s)}'
}

echo "== 3. consumer throughput from the read listeners (6 kcat, one per partition)"
consume_all "two read brokers"
kill "$(cat "$RUN/read-2.pid")"
# Wait until the read view names one broker (read-2's lease has lapsed).
for _ in $(seq 120); do
  n=$(kcat -L -b 127.0.0.1:9192 -m 5 2>/dev/null | awk '/brokers:/ {print $1}')
  [[ $n == 1 ]] && break
  sleep 0.5
done
consume_all "one read broker"
