// Package replica owns the partitions a broker hosts. Today each partition
// is a single local log (one replica, as in `sluice dev`); the raft group
// per partition of DESIGN.md slots in behind the same Partition type, so
// the server never learns how a write became committed.
//
// # High watermark
//
// The high watermark is the end of the committed prefix: what a consumer
// may read and what acks=all waits for. With one local replica an entry is
// committed once it is durable under the broker's flush policy (the fsync
// the Flusher groups across partitions); with log.fsync=never it is
// committed once written. A per-partition goroutine follows the log end
// offset, waits for durability and advances the watermark, waking Fetch
// long-polls and acks=all producers through a broadcast channel.
package replica
