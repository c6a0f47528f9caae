#!/usr/bin/env bash
# `make bench`: build Sluice and the load generator, fetch Apache Kafka from
# Maven Central (once, into a cache directory), then run bench/runner, which
# measures the machine's limits, runs every workload against both brokers and
# writes BENCHMARKS.md. Arguments go to the runner, e.g.
#   bash bench/run.sh -pairs 5 -duration 15s
#   bash bench/run.sh -workloads W1,W3 -out /tmp/b.md
#   bash bench/run.sh -modes -out docs/replication-modes.md   # the replication modes (no Kafka)
#   bash bench/run.sh -shared-cost -s3proxy bin/s3proxy-...jar -out docs/replication-modes.md   # shared storage's requests and cold start
#   bash bench/run.sh -profile /tmp/prof        # pprof of Sluice under W1 and W3
#   bash bench/run.sh -section tls              # one section of BENCHMARKS.md alone (tls, txn, share, cluster)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
KAFKA_VERSION=4.4.0
CACHE=${SLUICE_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice-bench}
LIBS="$CACHE/kafka-$KAFKA_VERSION/libs"

# -modes compares Sluice's replication modes with each other, -shared-cost
# measures shared-storage mode alone: no Kafka.
NEED_KAFKA=1
for a in "$@"; do [ "$a" = -modes ] || [ "$a" = -shared-cost ] && NEED_KAFKA=0; done
tools="taskset dd findmnt"
[ $NEED_KAFKA = 1 ] && tools="java mvn $tools"
for tool in $tools; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is required" >&2; exit 1; }
done
if [ $NEED_KAFKA = 1 ]; then
  java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  if [ "${java_major:-0}" -lt 17 ]; then
    echo "bench: Kafka $KAFKA_VERSION needs Java 17 or later (found ${java_major:-none})" >&2; exit 1
  fi
fi
if [ "$(nproc)" -lt 2 ]; then
  echo "bench: needs 2 cores (broker and generator are pinned apart)" >&2; exit 1
fi

# Private binaries, so a rebuild of bin/ during the run changes nothing.
# BENCH_SOURCE=head builds Sluice from the last commit (git archive HEAD)
# instead of the working tree.
BIN=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench-bin.XXXXXX")
trap 'rm -rf "$BIN"' EXIT
if [ "${BENCH_SOURCE:-tree}" = head ]; then
  version=$(git rev-parse --short HEAD)
  src="$BIN/src"; mkdir "$src"
  git archive HEAD | tar -x -C "$src"
  echo "bench: building Sluice $version (HEAD)" >&2
  (cd "$src" && "$GO" build -ldflags "-X main.version=$version" -o "$BIN/sluice" ./cmd/sluice)
  rm -rf "$src"
else
  version=$(git describe --always --dirty 2>/dev/null || echo dev)
  echo "bench: building Sluice $version (working tree)" >&2
  "$GO" build -ldflags "-X main.version=$version" -o "$BIN/sluice" ./cmd/sluice
fi
"$GO" build -o "$BIN/sluice-bench" ./cmd/sluice-bench
"$GO" build -o "$BIN/runner" ./bench/runner

if [ $NEED_KAFKA = 1 ] && [ ! -f "$LIBS/.complete" ]; then
  echo "bench: fetching Apache Kafka $KAFKA_VERSION and its runtime dependencies into $LIBS" >&2
  rm -rf "$LIBS"
  mvn -q -B -f bench/pom.xml dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$LIBS"
  touch "$LIBS/.complete"
fi

"$BIN/runner" -sluice "$BIN/sluice" -gen "$BIN/sluice-bench" -sluice-version "$version" \
  -kafka-libs "$LIBS" -command "${BENCH_SOURCE:+BENCH_SOURCE=$BENCH_SOURCE }${BENCH_COMMAND:-make bench}" "$@"
