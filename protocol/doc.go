// Package protocol is Sluice's Kafka wire layer below the handlers: framing
// with a maximum frame size, request and response headers, the table of API
// versions the broker advertises, and a zero-copy view of v2 record batches
// that validates them (length, magic, CRC-32C, record count) and patches
// base offset, leader epoch and LogAppendTime in place.
//
// It is built on github.com/twmb/franz-go/pkg/kmsg for request and response
// bodies and knows nothing of storage or replication.
package protocol
