// Package server is Sluice's Kafka front end: listeners, connections, the
// request pipeline and one file per Kafka API, named by key as kfake names
// them (00_produce.go, 01_fetch.go, ...).
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
// slot that writes nothing.
//
// A malformed frame, a header that cannot be parsed or a Go error from a
// handler closes that connection with one log line; Kafka-level failures
// travel as error codes in the response.
package server
