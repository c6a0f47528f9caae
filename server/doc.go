// Package server is Sluice's Kafka front end: listeners, connections, the
// request pipeline and one file per Kafka API, named by key as kfake names
// them (00_produce.go, 01_fetch.go, ...). Each file's comment lists the
// versions served and how they differ; the advertised versions live in
// protocol's table, and a test checks that the two agree.
//
// # Views and roles
//
// Every listener has a view, write, read or mixed (views.go): Metadata
// lists only the brokers with an endpoint of that view and names as a
// partition's leader its raft leader (write, mixed) or one of its read
// replicas (read), so producers and consumers of one cluster are sent to
// different brokers (docs/architecture.md, "Routing"). A read broker
// forwards a Produce it receives to the leader (forward.go); a write
// broker answers a consumer's Fetch on a mixed listener with a KIP-392
// preferred read replica (01_fetch.go).
//
// # Partitions
//
// The handlers reach a hosted partition through hostedPartition
// (partitions.go), package partition's Partition: server imports neither
// replica nor log (a test checks the import graph), and cmd/sluice hands
// it the raft host as a partition.Host. Every partition is a raft replica: a
// one-voter group on a broker without replica.listen (`sluice dev`), a
// group over the brokers the metastore assigns in a cluster; there is no
// other data path (the read-only __consumer_offsets view, offsets_topic.go,
// keeps plain local logs of its own). Fetch sends records as ranges of the segment
// files (fetch_response.go, conn_send.go: sendfile for large ranges); a
// replicated partition's log holds data batches only (raft's own entries
// take no offset, replica/doc.go). OpenPartitions opens every assigned partition at
// start; FollowCatalog applies changes other brokers made; RunReassignments
// moves raft configurations towards the metastore's placement
// (reassign.go); RunRetention and RunLeaderBalance run periodically.
//
// # Metadata
//
// Topics, configs, brokers and producer-id blocks come from the Catalog
// (catalog.go), implemented by metastore.Client, whose reads come from a
// local cache; admin requests are written through it to the metastore. A
// Lease (lease.go) keeps the broker registered. Consumer groups are served
// by package coordinator (groups.go).
//
// # Connections
//
// Each connection has a reader goroutine and a writer goroutine. The reader
// parses a frame, checks the version against protocol's table and runs the
// handler's first stage inline, so requests on one connection are applied
// in the order they arrived (an idempotent producer's five in-flight
// batches must reach the log in sequence order). A handler that has to wait
// (acks=all until the write is durable, a Fetch long-poll) finishes in a
// second stage on its own goroutine. Every request owns a slot in a bounded
// queue, and the writer sends slots strictly in request order, so responses
// leave in order however the second stages finish. acks=0 produces own a
// slot that writes nothing. A response is encoded when it is answered
// (a Fetch's records stay file ranges) and counts, until the writer has
// handed it to the socket, against the connection's
// queued.max.response.bytes: past it the reader reads no further request,
// so a client that pipelines and never reads stalls only itself.
//
// A malformed frame, a header that cannot be parsed or a Go error from a
// handler closes that connection with one log line; Kafka-level failures
// travel as error codes in the response.
package server
