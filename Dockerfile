# syntax=docker/dockerfile:1
# Sluice broker image: a static binary on distroless, running as non-root.
#   docker build --build-arg VERSION=$(git describe --always --dirty) -t sluice .
#   docker run --rm -p 9092:9092 -p 9644:9644 sluice          # sluice dev
#   docker run ... sluice serve --config /etc/sluice/server.properties
# deploy/compose/compose.yaml runs a 3 meta + 3 write + 2 read cluster.

# The Go release of go.mod's go line.
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
# Stamped into `sluice version` (main.version).
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (no cgo), reproducible paths (-trimpath); the version is the build
# argument, not the VCS state, since .git is not part of the context.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH:-amd64} \
    go build -buildvcs=false -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sluice ./cmd/sluice
# The data directory, owned by distroless's nonroot user (65532), so that
# a fresh volume mounted there is writable.
RUN mkdir -p /out/var/lib/sluice

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice /usr/local/bin/sluice
COPY --from=build --chown=65532:65532 /out/var/lib/sluice /var/lib/sluice
USER 65532:65532
VOLUME ["/var/lib/sluice"]
# 9092 Kafka, 9644 admin HTTP (/metrics, /healthz, /readyz), 9391 metadata
# quorum (meta.listen), 9491 replication (replica.listen).
EXPOSE 9092 9644 9391 9491
ENTRYPOINT ["sluice"]
# One node with every role, reachable from the host with -p 9092:9092.
# Any other command line (serve --config ...) replaces this one.
CMD ["dev", "--data-dir=/var/lib/sluice", "--admin-addr=0.0.0.0:9644", \
     "--listeners=PLAINTEXT://0.0.0.0:9092", "--advertised-listeners=PLAINTEXT://127.0.0.1:9092"]
