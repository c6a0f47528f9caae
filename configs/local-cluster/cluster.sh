#!/usr/bin/env bash
# Starts or stops the local cluster described in README.md beside this file.
#   cluster.sh start          # returns once every process serves
#   cluster.sh start-shared   # the same on shared storage: a local S3
#                             # server (S3Proxy, the jar $S3PROXY_JAR) first
#   cluster.sh stop
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin/sluice}
RUN=data/local-cluster
[[ ${1:-} == start-shared ]] && RUN=data/local-cluster-shared
CFG=configs/local-cluster
mkdir -p "$RUN"

wait_http() { # url timeout_s
  local deadline=$((SECONDS + $2))
  until curl -fsS -o /dev/null "$1" 2>/dev/null; do
    if ((SECONDS > deadline)); then echo "timed out waiting for $1" >&2; return 1; fi
    sleep 0.2
  done
}

EXTRA=() # --set flags every broker (not the meta nodes) gets: start-shared

start_one() { # name
  local name=$1 args=()
  if [[ -f $RUN/$name.pid ]] && kill -0 "$(cat "$RUN/$name.pid")" 2>/dev/null; then
    echo "$name already running"; return
  fi
  # Each process keeps its data in $RUN/<name> (the shared cluster in a
  # directory of its own, so the two never mix).
  args=(--set "data.dir=$RUN/$name")
  [[ $name == meta-* ]] || args+=(${EXTRA[@]+"${EXTRA[@]}"})
  nohup "$BIN" serve --config "$CFG/$name.yaml" --log-format json "${args[@]}" >>"$RUN/$name.log" 2>&1 &
  echo $! >"$RUN/$name.pid"
}

# The local S3 server for start-shared: S3Proxy (a Java S3 server over a
# local directory) on loopback port 9808, one identity, and the bucket the
# brokers write to. Credentials reach the brokers through the environment,
# as on a real deployment (never in a config file).
S3_PORT=9808
S3_BUCKET=sluice
export AWS_ACCESS_KEY_ID=sluice-local AWS_SECRET_ACCESS_KEY=sluice-local-secret
start_s3() {
  local jar=${S3PROXY_JAR:?S3PROXY_JAR names the S3Proxy jar (make cluster-shared fetches it)}
  if [[ -f $RUN/s3proxy.pid ]] && kill -0 "$(cat "$RUN/s3proxy.pid")" 2>/dev/null; then
    echo "s3proxy already running"
  else
    mkdir -p "$RUN/s3proxy/data"
    printf '%s\n' "s3proxy.endpoint=http://127.0.0.1:$S3_PORT" "s3proxy.authorization=aws-v2-or-v4" \
      "s3proxy.identity=$AWS_ACCESS_KEY_ID" "s3proxy.credential=$AWS_SECRET_ACCESS_KEY" \
      "jclouds.provider=filesystem-nio2" "jclouds.filesystem.basedir=$PWD/$RUN/s3proxy/data" >"$RUN/s3proxy/s3proxy.conf"
    nohup java -Xmx256m -jar "$jar" --properties "$RUN/s3proxy/s3proxy.conf" >>"$RUN/s3proxy.log" 2>&1 &
    echo $! >"$RUN/s3proxy.pid"
  fi
  # Serving means the bucket can be made (or exists). curl signs with SigV4;
  # the empty body's SHA-256 is named, as S3 servers check it.
  local deadline=$((SECONDS + 60)) code
  local empty=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
  while :; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "x-amz-content-sha256: $empty" --aws-sigv4 "aws:amz:us-east-1:s3" \
      --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "http://127.0.0.1:$S3_PORT/$S3_BUCKET" || true)
    [[ $code == 200 || $code == 409 ]] && break
    if ((SECONDS > deadline)); then echo "s3proxy did not serve S3 on 127.0.0.1:$S3_PORT (last answer $code; see $RUN/s3proxy.log)" >&2; return 1; fi
    sleep 0.5
  done
}

start_cluster() {
  for i in 1 2 3; do start_one meta-$i; done
  for i in 1 2 3; do wait_http "http://127.0.0.1:966$i/readyz" 30; done
  for i in 1 2 3; do start_one write-$i; done
  for i in 1 2; do start_one read-$i; done
  for port in 9644 9645 9646 9647 9648; do wait_http "http://127.0.0.1:$port/readyz" 60; done
  echo "cluster serving: write 127.0.0.1:9092-9094, read 127.0.0.1:9192-9193, mixed 127.0.0.1:9292-9296 (logs in $RUN)"
}

case "${1:-}" in
start)
  start_cluster
  ;;
start-shared)
  start_s3
  EXTRA=(--set shared.storage.type=s3 --set shared.storage.s3.endpoint=127.0.0.1:$S3_PORT
    --set shared.storage.s3.bucket=$S3_BUCKET --set shared.storage.s3.path.style=true
    --set replication.mode=shared)
  start_cluster
  echo "shared storage: S3 bucket $S3_BUCKET on 127.0.0.1:$S3_PORT (S3Proxy; every topic defaults to replication.mode=shared)"
  ;;
stop)
  for f in data/local-cluster/*.pid data/local-cluster-shared/*.pid; do
    [[ -e $f ]] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
  done
  for f in data/local-cluster/*.pid data/local-cluster-shared/*.pid; do
    [[ -e $f ]] || continue
    pid=$(cat "$f")
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
  echo "cluster stopped"
  ;;
*)
  echo "usage: $0 start|start-shared|stop" >&2; exit 2 ;;
esac
