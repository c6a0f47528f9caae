#!/usr/bin/env bash
# `make bench-tls`: the cost of TLS on Sluice's Kafka listeners. One
# `sluice dev --secure` node serves the same data over three listeners,
# PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512, the CA it generates), and
# sluice-bench runs the same workload through each in turn, the order
# rotating every round (A B C, B C A, C A B, ...), so each protocol's runs
# are spread over the same minutes; the summary gives each protocol's
# median and its median ratio to the PLAINTEXT run of the same round.
# Broker CPU is read from /proc between runs (user+system seconds per GB
# of record values acknowledged). Arguments:
#   bash bench/tls.sh [-rounds 3] [-duration 12s] [-warmup 3s] [-consumers 0] [-out FILE]
# (-consumers 1 adds a tailing consumer: Fetch over TLS cannot use
# sendfile, so the read side's cost shows there.)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
ROUNDS=3 DURATION=12s WARMUP=3s CONSUMERS=0 OUT=
while [ $# -gt 0 ]; do
  case "$1" in
    -rounds) ROUNDS=$2; shift 2 ;;
    -duration) DURATION=$2; shift 2 ;;
    -warmup) WARMUP=$2; shift 2 ;;
    -consumers) CONSUMERS=$2; shift 2 ;;
    -out) OUT=$2; shift 2 ;;
    *) echo "bench-tls: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in taskset jq; do
  command -v "$tool" >/dev/null || { echo "bench-tls: $tool is required" >&2; exit 1; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench-tls.XXXXXX")
PID=
cleanup() {
  if [ -n "$PID" ]; then kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
"$GO" build -o "$WORK/sluice" ./cmd/sluice
"$GO" build -o "$WORK/sluice-bench" ./cmd/sluice-bench

# Free loopback ports below the ephemeral range.
port() { while :; do p=$((20000 + RANDOM % 10000)); (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; return; }; done; }
PLAIN=127.0.0.1:$(port) SSL=127.0.0.1:$(port) SASL=127.0.0.1:$(port) ADMIN=127.0.0.1:$(port)
SLUICE_BOOTSTRAP_USER=bench:bench-secret taskset -c 0 "$WORK/sluice" dev --secure --data-dir "$WORK/data" \
  --admin-addr "$ADMIN" --listeners "PLAINTEXT://$PLAIN,SSL://$SSL,SASL_SSL://$SASL" \
  --set allow.everyone.if.no.acl.found=true 2>"$WORK/broker.log" &
PID=$!
for _ in $(seq 600); do
  curl -fs "http://$ADMIN/readyz" >/dev/null 2>&1 && break
  kill -0 "$PID" 2>/dev/null || { cat "$WORK/broker.log" >&2; exit 1; }
  sleep 0.1
done
CA=$WORK/data/tls/ca.crt
printf 'security.protocol=PLAINTEXT\n' >"$WORK/PLAINTEXT.properties"
printf 'security.protocol=SSL\nssl.truststore.location=%s\n' "$CA" >"$WORK/SSL.properties"
printf '%s\n' "security.protocol=SASL_SSL" "ssl.truststore.location=$CA" "sasl.mechanism=SCRAM-SHA-512" \
  'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="bench" password="bench-secret";' \
  >"$WORK/SASL_SSL.properties"
declare -A ADDR=([PLAINTEXT]=$PLAIN [SSL]=$SSL [SASL_SSL]=$SASL)
PROTOS=(PLAINTEXT SSL SASL_SSL)

cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
TICK=$(getconf CLK_TCK)
RESULTS=$WORK/results.tsv
echo "bench-tls: $ROUNDS rounds of ${PROTOS[*]}, $DURATION each ($WARMUP warm-up), 1 KiB, acks=all, 8 partitions, 4 producers, $CONSUMERS consumers" >&2
start=$(date -u +%s)
for r in $(seq 0 $((ROUNDS - 1))); do
  for k in 0 1 2; do
    proto=${PROTOS[$(((r + k) % 3))]}
    c0=$(cpu)
    taskset -c 1 "$WORK/sluice-bench" -quiet -brokers "${ADDR[$proto]}" -command-config "$WORK/$proto.properties" \
      -topic "tls-$proto-$r" -partitions 8 -record-size 1024 -producers 4 -consumers "$CONSUMERS" \
      -duration "$DURATION" -warmup "$WARMUP" -label "$proto round $r" >"$WORK/run.json"
    c1=$(cpu)
    jq -r --arg p "$proto" --arg r "$r" --arg cpu "$(( c1 - c0 ))" --arg tick "$TICK" \
      '[$p, $r, .produce.records_per_s, .produce.mb_per_s, .produce.ack_latency.p50_ms, .produce.ack_latency.p99_ms,
        (if .consume.records > 0 then .consume.e2e_latency.p50_ms else "-" end),
        (($cpu | tonumber) / ($tick | tonumber) / (.produce.total_bytes / 1e9))] | @tsv' "$WORK/run.json" | tee -a "$RESULTS" >&2
  done
done
elapsed=$(( $(date -u +%s) - start ))

# Medians per protocol, and the median over rounds of each run's ratio to
# the PLAINTEXT run of its round.
summary() {
  echo "| protocol | produce records/s | MB/s | ack p50 (ms) | ack p99 (ms) | e2e p50 (ms) | broker CPU-s per GB | throughput / PLAINTEXT (per round) | CPU per GB / PLAINTEXT (per round) |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for proto in "${PROTOS[@]}"; do
    awk -F'\t' -v p="$proto" '
      function median(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      $1 == "PLAINTEXT" { base[$2] = $3; basecpu[$2] = $8 }
      $1 == p { n++; rps[n] = $3; mbs[n] = $4; p50[n] = $5; p99[n] = $6; e2e[n] = $7; cpu[n] = $8; round[n] = $2 }
      END {
        for (i = 1; i <= n; i++) { tr[i] = rps[i] / base[round[i]]; cr[i] = cpu[i] / basecpu[round[i]]; lo = (i == 1 || tr[i] < lo) ? tr[i] : lo; hi = (i == 1 || tr[i] > hi) ? tr[i] : hi }
        e = (e2e[1] == "-") ? "-" : sprintf("%.1f", median(e2e, n))
        printf "| %s | %.0f | %.1f | %.1f | %.1f | %s | %.2f | %.2fx (%.2f-%.2f) | %.2fx |\n", p, median(rps, n), median(mbs, n), median(p50, n), median(p99, n), e, median(cpu, n), median(tr, n), lo, hi, median(cr, n)
      }' "$RESULTS"
  done
  echo
  echo "$ROUNDS rounds, $DURATION per run ($WARMUP warm-up), ${elapsed}s in all; $(git rev-parse --short HEAD), $("$GO" env GOVERSION); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
}
if [ -n "$OUT" ]; then summary | tee "$OUT"; else summary; fi
