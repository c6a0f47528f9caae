package protocol

import "github.com/twmb/franz-go/pkg/kmsg"

// VersionRange is the inclusive range of versions Sluice serves for one API.
type VersionRange struct{ Min, Max int16 }

// versions is the single table ApiVersions is built from. An API is listed
// here only once its handler is complete; a server test fails if a listed
// key has no handler, or a handler has no entry.
//
// Floors follow what today's clients need for their feature detection
// rather than Kafka 4's KIP-896 floor (docs/architecture.md, "Routing",
// version table):
//   - Produce from v0 because librdkafka switches compression off unless
//     v0 is in range; v0-v2 are then refused the way Kafka 4 refuses them.
//   - Metadata from v0 (librdkafka 2.0 tops out at v4, kafkajs at v6).
//   - Fetch from v4, the first version that carries v2 record batches.
//   - ListOffsets from v1: v0's multi-offset shape died with Kafka 4.
//   - The group APIs and FindCoordinator from v0 (librdkafka gates its
//     group consumer on FindCoordinator v0; kafka-go joins with JoinGroup
//     v1/v2 and commits with OffsetCommit v2).
var versions = map[int16]VersionRange{
	0:  {0, 13}, // Produce
	1:  {4, 18}, // Fetch
	2:  {1, 11}, // ListOffsets
	3:  {0, 13}, // Metadata
	8:  {0, 10}, // OffsetCommit
	9:  {0, 10}, // OffsetFetch
	10: {0, 6},  // FindCoordinator
	11: {0, 9},  // JoinGroup
	12: {0, 4},  // Heartbeat
	13: {0, 5},  // LeaveGroup
	14: {0, 5},  // SyncGroup
	15: {0, 6},  // DescribeGroups
	16: {0, 5},  // ListGroups
	17: {0, 1},  // SaslHandshake
	18: {0, 5},  // ApiVersions
	19: {0, 7},  // CreateTopics
	20: {0, 6},  // DeleteTopics
	21: {0, 2},  // DeleteRecords
	22: {0, 5},  // InitProducerId
	23: {0, 4},  // OffsetForLeaderEpoch
	24: {0, 5},  // AddPartitionsToTxn
	25: {0, 3},  // AddOffsetsToTxn
	26: {0, 5},  // EndTxn
	27: {0, 2},  // WriteTxnMarkers
	28: {0, 5},  // TxnOffsetCommit
	29: {0, 3},  // DescribeAcls (advertised with an authorizer only)
	30: {0, 3},  // CreateAcls (advertised with an authorizer only)
	31: {0, 3},  // DeleteAcls (advertised with an authorizer only)
	32: {0, 4},  // DescribeConfigs
	33: {0, 2},  // AlterConfigs
	35: {0, 4},  // DescribeLogDirs
	36: {0, 2},  // SaslAuthenticate
	37: {0, 3},  // CreatePartitions
	42: {0, 2},  // DeleteGroups
	43: {0, 2},  // ElectLeaders
	44: {0, 1},  // IncrementalAlterConfigs
	45: {0, 1},  // AlterPartitionReassignments
	46: {0, 0},  // ListPartitionReassignments
	47: {0, 0},  // OffsetDelete
	50: {0, 0},  // DescribeUserScramCredentials
	51: {0, 0},  // AlterUserScramCredentials
	48: {0, 1},  // DescribeClientQuotas
	49: {0, 1},  // AlterClientQuotas
	60: {0, 2},  // DescribeCluster
	61: {0, 0},  // DescribeProducers
	65: {0, 0},  // DescribeTransactions
	66: {0, 2},  // ListTransactions
	68: {0, 1},  // ConsumerGroupHeartbeat
	69: {0, 1},  // ConsumerGroupDescribe
	75: {0, 0},  // DescribeTopicPartitions
	// The share group APIs (KIP-932), advertised by a single node only
	// (server/share.go). v0 of 76-79 was Kafka's early access version.
	76: {1, 1}, // ShareGroupHeartbeat
	77: {1, 1}, // ShareGroupDescribe
	78: {1, 2}, // ShareFetch
	79: {1, 2}, // ShareAcknowledge
	90: {0, 1}, // DescribeShareGroupOffsets
	91: {0, 0}, // AlterShareGroupOffsets
	92: {0, 0}, // DeleteShareGroupOffsets
}

// ProduceMinServed is the lowest Produce version actually served: v0-v2
// carry the old message formats, advertised only for librdkafka's sake.
const ProduceMinServed = 3

// Versions returns the advertised range for key.
func Versions(key int16) (VersionRange, bool) {
	r, ok := versions[key]
	return r, ok
}

// Keys returns every advertised key in ascending order.
func Keys() []int16 {
	keys := make([]int16, 0, len(versions))
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		if _, ok := versions[k]; ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// Supported reports whether version of key is advertised.
func Supported(key, version int16) bool {
	r, ok := versions[key]
	return ok && version >= r.Min && version <= r.Max
}

func maxKmsgVersion(key int16) int16 {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return -1
	}
	return req.MaxVersion()
}

// KmsgMaxVersion is the newest version kmsg can encode for key, -1 if none.
func KmsgMaxVersion(key int16) int16 { return maxKmsgVersion(key) }
