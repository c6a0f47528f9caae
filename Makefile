# Sluice. `make run` starts a single node; `make test` runs every test.
GO       ?= go
BIN      := bin/sluice
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
FUZZTIME ?= 30s
# Every package of the module (compat-tests is a module of its own).
PKGS     := ./...
# Unit packages: all but cmd/sluice, which holds the real-process fault
# tests, run alone afterwards so that failover times are not measured on
# a starved CPU.
UNIT     = $(shell $(GO) list ./... | grep -v '/cmd/sluice$$')

.PHONY: build run test test-setup test-s3 test-suites test-unit test-faults test-compat compat fuzz attacks bench bench-compaction bench-cluster bench-isolation bench-modes bench-shared-cost bench-tls lint verify clean cluster cluster-shared cluster-stop image deploy-check

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/sluice

run: build
	./$(BIN) dev

# A local cluster: 3 meta nodes, 3 write brokers, 2 read brokers, each its
# own process (configs/local-cluster/README.md has the ports). Returns once
# every process serves.
cluster: build
	configs/local-cluster/cluster.sh start

# The same cluster on shared storage (replication.mode=shared for every
# topic) over a local S3 server, S3Proxy (its jar fetched once, see
# $(S3PROXY)).
cluster-shared: build $(S3PROXY)
	S3PROXY_JAR=$(abspath $(S3PROXY)) configs/local-cluster/cluster.sh start-shared

cluster-stop:
	configs/local-cluster/cluster.sh stop

# Every test: unit tests with the race detector, the real-process fault
# tests, then the black-box compatibility suite against the real binary (its
# own module under compat-tests/). test-setup first fetches the language
# packages the compat suite drives. Each suite runs even when an earlier one
# failed (-k); then every test skipped because this machine lacks a tool is
# listed (under CI=true such a skip is a failure instead).
SKIP_FILE := $(abspath bin/test-skips.txt)
test: test-setup
	@mkdir -p bin && rm -f $(SKIP_FILE)
	@status=0; SLUICE_SKIP_FILE=$(SKIP_FILE) $(MAKE) --no-print-directory -k test-suites || status=$$?; \
	if [ -s $(SKIP_FILE) ]; then \
	  echo "== skipped: this machine lacks what these tests need (make test-setup, README prerequisites)"; \
	  sed 's/^/  /' $(SKIP_FILE); \
	else echo "== no test was skipped for a missing tool"; fi; \
	exit $$status

test-suites: test-unit test-faults test-compat

# The compat suite's language packages, each fetched again only when its
# pinned list changes: a Python virtual environment (compat-tests/.venv, put
# first on PATH for the suite), the Node packages (npm ci), and the Java
# program's Maven dependencies and plugins, so that the suite can build it
# offline. kcat is a system package: its absence is reported here, and the
# tests that need it are skipped (failed under CI=true).
VENV        := compat-tests/.venv
PROMTOOL         := bin/promtool
PROMTOOL_VERSION := v0.316.0
JS_STAMP    := compat-tests/js/node_modules/.installed
MAVEN_STAMP := bin/.maven-fetched
HELM_VERSION := v3.22.0
HELM_STAMP   := bin/.helm-built-$(HELM_VERSION)
WEED_VERSION := v0.0.0-20261109003541-7506e5f91cd6
WEED         := bin/weed-$(WEED_VERSION)
S3PROXY_VERSION := 4.1.0
S3PROXY         := bin/s3proxy-$(S3PROXY_VERSION)-jar-with-dependencies.jar
test-setup: $(VENV)/.installed $(JS_STAMP) $(MAVEN_STAMP) $(HELM_STAMP) $(PROMTOOL) $(S3PROXY)
	@command -v kcat >/dev/null 2>&1 || echo "kcat not found: install it (Debian/Ubuntu: apt-get install kcat); the kcat tests are skipped"

# helm for the chart tests in cmd/sluice (deploy_test.go pins the same
# version), built here once from the Go module proxy (go run keeps the
# executable in the build cache), so that its first build, minutes long,
# does not count against test-faults' timeout. Without the proxy the chart
# tests are skipped (failed under CI=true).
$(HELM_STAMP):
	@mkdir -p bin
	@if GOFLAGS=-mod=mod $(GO) run helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) version --short; then touch $@; \
	else echo "helm $(HELM_VERSION) could not be built: the chart tests will be skipped"; fi

# promtool checks deploy/monitoring (TestMonitoringRules, TestClusterMetrics),
# built once from the Go module proxy; if that fails the tests say so (a
# skip, or a failure under CI=true).
$(PROMTOOL):
	@mkdir -p bin
	GOBIN=$(abspath bin) $(GO) install github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION) || \
	  echo "promtool could not be built: the deploy/monitoring checks are skipped"

# S3Proxy, the real S3 server the S3 tests of `make test` start (package
# internal/s3test), `make cluster-shared` and `make bench-shared-cost`
# run: its jar with
# dependencies, fetched once from Maven Central. If that fails the S3 tests say so (a skip, or a failure under
# CI=true).
$(S3PROXY):
	@mkdir -p bin
	@echo "fetching S3Proxy $(S3PROXY_VERSION)'s jar from Maven Central"
	@mvn -B -q dependency:copy -Dartifact=org.gaul:s3proxy:$(S3PROXY_VERSION):jar:jar-with-dependencies -DoutputDirectory=$(abspath bin) || \
	  echo "S3Proxy $(S3PROXY_VERSION) could not be fetched: the S3 tests will be skipped"

# SeaweedFS's weed, a second real S3 server for the same tests
# (`make test-s3`),
# built once from its Go module (its go.mod has replace directives, so `go
# install module@version` refuses it: the module is downloaded, then built
# in the module cache as the main module). A cold build costs about ten
# minutes of CPU, too much for `make test`. If the build fails the S3 tests
# say so (a skip, or a failure under CI=true).
$(WEED):
	@mkdir -p bin
	@if (cd / && $(GO) mod download github.com/seaweedfs/seaweedfs@$(WEED_VERSION)) && \
	  (cd "$$($(GO) env GOMODCACHE)/github.com/seaweedfs/seaweedfs@$(WEED_VERSION)" && \
	   GOFLAGS=-buildvcs=false $(GO) build -o $(abspath $@) ./weed); then :; \
	else echo "weed $(WEED_VERSION) could not be built: the objstore S3 tests will be skipped"; fi

$(VENV)/.installed: compat-tests/python/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -r compat-tests/python/requirements.txt
	@touch $@

$(JS_STAMP): compat-tests/js/package-lock.json compat-tests/js/package.json
	cd compat-tests/js && npm ci --no-audit --no-fund
	@touch $@

$(MAVEN_STAMP): compat-tests/java/pom.xml
	@mkdir -p bin
	mvn -B -q -f compat-tests/java/pom.xml -DskipTests package dependency:build-classpath -Dmdep.outputFile=target/classpath.txt
	rm -rf compat-tests/java/target
	@touch $@

# vet, then the unit packages with the race detector.
# The S3 tests (objstore's S3 backend here, the split cluster in shared
# mode over S3 in test-faults) run against S3Proxy.
test-unit:
	$(GO) vet $(PKGS)
	SLUICE_S3PROXY_JAR=$(abspath $(S3PROXY)) $(GO) test -race -count=1 -timeout 15m $(UNIT)

# The same S3 tests against SeaweedFS's weed instead (built here), apart
# from `make test` (see $(WEED)).
test-s3: $(WEED)
	SLUICE_WEED=$(abspath $(WEED)) $(GO) test -race -count=1 -timeout 10m -run 'S3' ./objstore
	SLUICE_WEED=$(abspath $(WEED)) $(GO) test -count=1 -timeout 10m -run 'S3' ./cmd/sluice

# Real processes on loopback: the metastore quorum losing its leader, and
# the 3 meta + 3 write + 1 read cluster losing a partition leader in every
# replication mode, all write brokers, then restarting whole; the metrics
# and the deploy/monitoring files checked against a real cluster.
# The nemesis (docs/reliability.md) runs here with 8 fault rounds.
test-faults:
	PROMTOOL=$(abspath $(PROMTOOL)) SLUICE_S3PROXY_JAR=$(abspath $(S3PROXY)) $(GO) test -count=1 -p 1 -timeout 20m ./cmd/sluice/...

# The nemesis (TestClusterNemesis) for ROUNDS fault rounds against the
# split cluster in network namespaces (root; otherwise without network
# faults); make test runs it with 8 rounds. NEMESIS_SEED replays a seed.
# About 10 s a round on two loaded cores: 1,000 rounds take some three hours.
# Clock jumps are in this mix (they need a second build of the binary).
ROUNDS ?= 100
.PHONY: nemesis
nemesis:
	SLUICE_NEMESIS_ROUNDS=$(ROUNDS) SLUICE_NEMESIS_CLOCK=1 $(if $(NEMESIS_SEED),SLUICE_NEMESIS_SEED=$(NEMESIS_SEED)) \
	  $(GO) test -count=1 -v -timeout 0 -run '^TestClusterNemesis$$' ./cmd/sluice

# Most compat tests run in parallel, COMPAT_PARALLEL at a time: they spend
# most of their time waiting (client timeouts, rebalances, session
# expiries), so on two cores the suite used about a third of the CPU one at
# a time. Tests with tight timing bounds or process-wide effects (file
# descriptor limits, an environment variable) do not call t.Parallel and
# run alone first.
COMPAT_PARALLEL ?= 4
test-compat:
	cd compat-tests && PATH="$(abspath $(VENV))/bin:$$PATH" $(GO) test -count=1 -parallel $(COMPAT_PARALLEL) -timeout 20m ./...

# The whole compat suite, then docs/compat.md (client x scenario matrix)
# rendered from its results: the cells the matrix tests record in
# COMPAT_OUT and the `go test -json` outcome of every test. Fails when the
# suite fails, after writing the matrix.
COMPAT_OUT ?= bin/compat
compat: test-setup
	rm -rf $(COMPAT_OUT) && mkdir -p $(COMPAT_OUT)
	cd compat-tests && PATH="$(abspath $(VENV))/bin:$$PATH" SLUICE_COMPAT_MATRIX_DIR=$(abspath $(COMPAT_OUT)) $(GO) test -count=1 -parallel $(COMPAT_PARALLEL) -timeout 30m -json ./... \
	  > $(abspath $(COMPAT_OUT))/test.json; echo $$? > $(abspath $(COMPAT_OUT))/status
	cd compat-tests && $(GO) run ./cmd/compatmatrix -cells $(abspath $(COMPAT_OUT))/cells.jsonl \
	  -json $(abspath $(COMPAT_OUT))/test.json -out $(abspath docs/compat.md)
	@status=$$(cat $(COMPAT_OUT)/status); if [ "$$status" != 0 ]; then \
	  grep -h '"Action":"fail"' $(COMPAT_OUT)/test.json | grep -o '"Test":"[^"]*"' | sort -u; \
	  echo "compat suite failed (go test exit $$status); see $(COMPAT_OUT)/test.json"; exit 1; fi

# Every Fuzz target for FUZZTIME each.
fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# Sluice against Apache Kafka 4.4 on this machine; writes BENCHMARKS.md
# (about 25 minutes with the defaults, the cluster section included;
# BENCH_ARGS goes to bench/run.sh, e.g. BENCH_ARGS="-pairs 5 -duration 15s").
# Each hardening attack against a fresh `sluice dev`: peak RSS and whether
# other clients were served within 1 s (bench/attacks); not in make test.
attacks: build
	$(GO) run ./bench/attacks -bin bin/sluice $(ATTACKS_FLAGS)

bench:
	BENCH_COMMAND="make bench$(if $(BENCH_ARGS), BENCH_ARGS='$(BENCH_ARGS)')" bash bench/run.sh $(BENCH_ARGS)

# Sluice's log cleaner against Kafka 4.4's on the same keyed data, without
# compression and with lz4 (bench/runner -compaction; a few minutes;
# BENCH_COMPACTION_ARGS, e.g. "-pairs 5"): writes the compaction section of
# BENCHMARKS.md and leaves the rest as it is.
bench-compaction:
	BENCH_COMMAND="make bench-compaction" bash bench/run.sh -compaction $(BENCH_COMPACTION_ARGS)

# Figures of the local 3 meta + 3 write + 2 read cluster: acks=all produce
# throughput and latency, end-to-end latency through the read brokers,
# consumer throughput with two read brokers and with one.
bench-cluster:
	bash bench/cluster.sh

# Producers at a fixed rate alone and under N tailing / replaying readers,
# on the split Sluice cluster and a 3-broker Kafka 4.4 cluster (leaders and
# KIP-392 follower fetching), plus read scale-out with 1 and 2 read brokers
# (bench/runner -isolation; about 40 minutes with the defaults;
# BENCH_ISOLATION_ARGS, e.g. "-pairs 1 -duration 8s -iso-groups 1"):
# writes the isolation section of BENCHMARKS.md.
bench-isolation:
	BENCH_COMMAND="make bench-isolation$(if $(BENCH_ISOLATION_ARGS), BENCH_ISOLATION_ARGS='$(BENCH_ISOLATION_ARGS)')" bash bench/run.sh -isolation $(BENCH_ISOLATION_ARGS)

# The replication modes raft, semi-sync, async and shared (every broker
# on one shared directory) side by side on the split cluster (3 meta + 3 write + 2 read, a fresh one per mode and round,
# modes in rotating order): acks=all throughput and ack latency, end-to-end
# latency through a read broker, read staleness, writes with one and two
# write brokers killed, records lost on a leader kill -9 (bench/runner
# -modes; about 13 minutes with the defaults; BENCH_MODES_ARGS, e.g.
# "-modes-rounds 1 -modes-outage 15s"): writes the measured table of
# docs/replication-modes.md.
bench-modes:
	BENCH_COMMAND="make bench-modes$(if $(BENCH_MODES_ARGS), BENCH_MODES_ARGS='$(BENCH_MODES_ARGS)')" bash bench/run.sh -modes -out docs/replication-modes.md $(BENCH_MODES_ARGS)

# Shared-storage mode's object-store requests per GB written and read, a
# read broker's cold start on a long history, and a cost model from them:
# a split cluster per backend (S3 on S3Proxy, a shared directory, raft for
# comparison), each writing its history and read back by emptied read
# brokers (bench/runner -shared-cost; the defaults write 10 GB over S3 and 2
# GB each over the directory and raft, and need several times that in free
# disk; 3, 2 and 2 GB took 6 minutes on a loaded two-core machine;
# BENCH_SHARED_COST_ARGS, e.g. "-shared-cost-runs s3:1,dir:1,raft:1"):
# writes its section of docs/replication-modes.md.
bench-shared-cost: $(S3PROXY)
	BENCH_COMMAND="make bench-shared-cost$(if $(BENCH_SHARED_COST_ARGS), BENCH_SHARED_COST_ARGS='$(BENCH_SHARED_COST_ARGS)')" bash bench/run.sh -shared-cost -s3proxy $(abspath $(S3PROXY)) -out docs/replication-modes.md $(BENCH_SHARED_COST_ARGS)

# The cost of TLS: PLAINTEXT, SSL and SASL_SSL listeners of one node in
# rotating paired runs (bench/tls.sh; about 4 minutes; BENCH_TLS_ARGS,
# e.g. "-rounds 5 -consumers 1").
bench-tls:
	bash bench/tls.sh $(BENCH_TLS_ARGS)

# The Go micro-benchmarks of the storage and metadata packages.
bench-go:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./log/... ./metastore/...

# The container image; deploy/compose/compose.yaml runs sluice:local.
image:
	docker build --build-arg VERSION=$(VERSION) -t sluice:$(VERSION) -t sluice:local .

# The packaging checks alone (test-faults runs them too): helm lint and
# template of deploy/helm/sluice, the compose services' configs, the
# compose cluster's and the chart's processes run in network namespaces
# (root, iproute2), the systemd unit, the Dockerfile's go build.
deploy-check:
	$(GO) test -count=1 -timeout 15m -run '^(TestHelm.*|TestCompose.*|TestSystemdUnit|TestDockerfileBuild)$$' ./cmd/sluice

lint:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi

verify: lint
	$(GO) mod tidy && git diff --exit-code go.mod go.sum

clean:
	rm -rf bin $(VENV) compat-tests/js/node_modules compat-tests/java/target
