package compat

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"
)

// TestProduceUndecodableCompressedBatch: a v2 batch whose attributes say
// gzip but whose records are not gzip data. Kafka decompresses every
// compressed batch it is given while validating it
// (LogValidator.validateMessagesAndAssignOffsetsCompressed iterates the
// records), so the decompressor's KafkaException refuses the produce
// (ReplicaManager answers it as an error, UNKNOWN_SERVER_ERROR for a plain
// KafkaException) and nothing reaches the log. Sluice stores compressed
// batches without decompressing them (server/00_produce.go), accepts the
// batch, and every consumer then fails on it.
//
// The compat matrix found this: kafkajs with an LZ4 codec over lz4js wrote
// frames without the block-independence flag; Sluice stored them and the
// Java consumer failed on them ("Dependent block stream is unsupported"),
// where Kafka's broker, with the same LZ4 reader, would have refused the
// produce. Known to fail until Sluice validates compressed batches.
func TestProduceUndecodableCompressedBatch(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createTopic(ctx, t, newAdmin(t, b.KafkaAddr), "not-gzip", 1, nil)
	c := dialRaw(t, b.KafkaAddr)
	pv := pickVersion(t, c.apiVersions(), 0, 12)

	batch := recordBatch("plain", "records")
	binary.BigEndian.PutUint16(batch[21:23], 1) // attributes: gzip
	binary.BigEndian.PutUint32(batch[17:21], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))

	got := produceRaw(t, c, pv, "not-gzip", 0, batch)
	if got.ErrorCode == 0 {
		t.Errorf("Produce v%d of a batch flagged gzip whose records are not gzip: accepted at offset %d; Kafka refuses it "+
			"(it decompresses every compressed batch while validating it, and the decompressor's exception fails the append)",
			pv, got.BaseOffset)
	}
	if ends := endOffsets(ctx, t, newAdmin(t, b.KafkaAddr), "not-gzip"); ends[0] != 0 {
		t.Errorf("the undecodable batch is in the log (high watermark %d); consumers cannot read past it", ends[0])
	}
}
