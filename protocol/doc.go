// Package protocol is Sluice's Kafka wire layer below the handlers:
//
//   - framing (frame.go): size-prefixed frames bounded by a maximum frame
//     size, read into buffers recycled through a bounded free list;
//   - request and response headers (header.go), with ApiVersions' response
//     header always v0;
//   - the table of API versions the broker advertises (versions.go), the
//     only source ApiVersions is built from;
//   - v2 record batches. batch_header.go is the one codec of the 61-byte
//     header for the whole broker: BatchHeader.Decode reads it (the log,
//     the raft replicas and recovery use it), BatchHeader.Put encodes it
//     (the filler batch of a raft snapshot install), and the Batch*At constants are the field
//     positions. batch.go is the zero-copy Batch view: ParseBatch validates
//     a producer's batch (length, magic, CRC-32C, record count, codec), the
//     setters patch base offset, leader epoch and LogAppendTime in place.
//     records.go decompresses and checks the records inside a batch
//     (ValidateRecords), as Kafka's LogValidator does on every produce.
//
// It is built on github.com/twmb/franz-go/pkg/kmsg for request and response
// bodies and knows nothing of storage or replication.
package protocol
