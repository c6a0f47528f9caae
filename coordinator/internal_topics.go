package coordinator

// Kafka's internal topics (org.apache.kafka.common.internals.Topic): a
// KIP-848 regex never reaches them, clients may not produce to them, and
// Metadata flags them is_internal.
const (
	// OffsetsTopic is the topic through which Kafka's coordinator keeps
	// offsets and group metadata; Sluice serves a read-only view of it
	// (docs/architecture.md, "__consumer_offsets").
	OffsetsTopic = "__consumer_offsets"
	// TransactionStateTopic is the transaction coordinator's topic. Sluice
	// has none, but the name stays reserved as in Kafka.
	TransactionStateTopic = "__transaction_state"
)

// IsInternalTopic reports whether name is one of Kafka's internal topics.
func IsInternalTopic(name string) bool {
	return name == OffsetsTopic || name == TransactionStateTopic
}

// OffsetsPartition is the __consumer_offsets partition that holds group's
// offsets and metadata in Kafka: abs(group.hashCode()) % partitions, with
// Java's String.hashCode over UTF-16 code units and Kafka's Utils.abs
// (which maps Integer.MIN_VALUE to 0).
func OffsetsPartition(group string, partitions int32) int32 {
	var h int32
	for _, r := range group {
		if r >= 0x10000 { // a surrogate pair in Java's UTF-16
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}
