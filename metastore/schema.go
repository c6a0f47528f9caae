package metastore

import (
	"encoding/binary"
	"strconv"
)

// On-disk schema: one bbolt file, DataDir/meta.db, with these top-level
// buckets. Keys and values are described beside each name. Integers in keys
// are big-endian so cursors iterate in numeric order. JSON values are the Go
// types of types.go unless noted.
//
// Raft's own state (written in the Ready loop, step 1):
//
//	raft      "node_id"   -> u64 raft id owning this file (checked at Open)
//	          "hardstate" -> raftpb.HardState (protobuf)
//	          "snapshot"  -> raftpb.SnapshotMetadata (protobuf) of the last
//	                         snapshot: the log starts right after its index
//	raft_log  index (u64) -> raftpb.Entry (protobuf)
//
// The state machine (written in apply, step 3). Every apply transaction also
// writes meta/"applied" in the same bbolt transaction as the state it
// produced (etcd's cindex), so replay after a crash skips exactly the
// entries already applied. A snapshot copies these buckets; installing one
// replaces them all in one transaction.
//
//	meta           "applied"      -> u64 raft index of the last applied entry
//	               "cluster_id"   -> UUID string, set once by the first leader
//	               "incarnation"  -> u64 last broker incarnation handed out
//	               "producer_id"  -> u64 next producer id to hand out
//	               "members"      -> JSON map[id]addr of raft members
//	               "decommissioned" -> JSON []int32, sorted (decommission.go)
//	               "super_users"  -> JSON []string of principals, sorted:
//	                                 the stored super users (superusers.go)
//	topics         topic id (16 bytes) -> JSON Topic
//	topic_names    name -> topic id
//	brokers        broker id (u32) -> JSON Broker
//	broker_configs broker id (u32; -1 is 0xffffffff) -> JSON map[string]string
//	offsets        group -> nested bucket: topic 0x00 partition(u32) -> binary offsetValue (codec.go)
//	groups         group -> opaque group metadata blob
//	group_owners   group -> broker id (u32)
//	client_quotas  JSON QuotaEntity -> JSON map[string]float64 (quotas.go)
//	broker_dirs    broker id (u32) -> directory.id of its data directory (directories.go)
//	requests       reserved
//	acls           acl.Binding.Key() -> JSON acl.Binding (acls.go)
//	credentials    user 0x00 mechanism -> JSON ScramCredential (scram.go)
//	txn_state      transactional id -> JSON TxnState (txn.go)
//	txn_offsets    u16 len | transactional id | u16 len | group | topic 0x00
//	               partition(u32) -> binary offsetValue: offsets a
//	               transaction committed, pending until it commits (Rev:
//	               the revision that stored it; 0 if stored before)
//	group_configs  group -> JSON map[string]string: dynamic group configs
//	               (Kafka's GROUP config resource)
//	share_owners   u16 len | group | topic id (16 bytes) | partition(u32)
//	               -> owner broker(u32) incarnation(u64): the read broker
//	               holding the share-partition's state (ClaimSharePartition)
//	share_state    group -> nested bucket: topic id (16 bytes) partition(u32)
//	               -> opaque share-partition state blob (KIP-932; the
//	               coordinator's format, coordinator/share_persist.go)
//	shared_chunks  topic id (16 bytes) partition(u32) base offset(u64)
//	               -> JSON SharedChunk: which object holds which offsets of
//	               a shared-mode partition (shared.go)
//	shared_ends    topic id (16 bytes) partition(u32) -> u64 the
//	               partition's end offset (high watermark), then u64 its
//	               start offset once retention or DeleteRecords moved it
//	               (8 bytes before that)
//	shared_condemned  "data/<node>/<incarnation>" -> u64 sequence: the
//	               writer's objects up to it were condemned (deleted or
//	               about to be) and are never committed again
//	shared_refs    object key -> u64 how many shared_chunks entries name
//	               it (no entry: none does). Kept in the same transaction
//	               as every change of shared_chunks; rebuilt from
//	               shared_chunks when a database, snapshot image or
//	               backup written before it existed is opened
var (
	bucketRaft          = []byte("raft")
	bucketRaftLog       = []byte("raft_log")
	bucketMeta          = []byte("meta")
	bucketTopics        = []byte("topics")
	bucketTopicNames    = []byte("topic_names")
	bucketBrokers       = []byte("brokers")
	bucketBrokerConfigs = []byte("broker_configs")
	bucketOffsets       = []byte("offsets")
	bucketGroups        = []byte("groups")
	bucketGroupOwners   = []byte("group_owners")
	bucketACLs          = []byte("acls")
	bucketCredentials   = []byte("credentials")
	bucketTxnState      = []byte("txn_state")
	bucketBrokerDirs    = []byte("broker_dirs")
	bucketClientQuotas  = []byte("client_quotas")
	bucketTxnOffsets    = []byte("txn_offsets")
	bucketShareState    = []byte("share_state")
	bucketGroupConfigs  = []byte("group_configs")
	bucketSharedChunks  = []byte("shared_chunks")
	bucketSharedEnds    = []byte("shared_ends")
	bucketShareOwners   = []byte("share_owners")
	bucketSharedFence   = []byte("shared_condemned")
	bucketSharedRefs    = []byte("shared_refs")

	keyNodeID      = []byte("node_id")
	keyHardState   = []byte("hardstate")
	keySnapshot    = []byte("snapshot")
	keyApplied     = []byte("applied")
	keyClusterID   = []byte("cluster_id")
	keyBrokerLease = []byte("broker_lease_ms")
	keyIncarnation = []byte("incarnation")
	keyProducerID  = []byte("producer_id")
	keyMembers     = []byte("members")
)

// raftBuckets hold raft's log and hard state; they are never part of the
// state a snapshot installs.
var raftBuckets = [][]byte{bucketRaft, bucketRaftLog}

// laterBucket says whether a state bucket may be missing from a backup,
// written by a version before it existed (restored, it starts empty).
func laterBucket(name []byte) bool {
	return string(name) == string(bucketSharedChunks) || string(name) == string(bucketSharedEnds) ||
		string(name) == string(bucketShareOwners) || string(name) == string(bucketSharedFence) ||
		string(name) == string(bucketSharedRefs)
}

// stateBuckets are the state machine; a snapshot replaces exactly these.
var stateBuckets = [][]byte{
	bucketMeta, bucketTopics, bucketTopicNames, bucketBrokers, bucketBrokerConfigs,
	bucketOffsets, bucketGroups, bucketGroupOwners, bucketACLs, bucketCredentials,
	bucketTxnState, bucketClientQuotas, bucketBrokerDirs, bucketTxnOffsets, bucketShareState,
	bucketGroupConfigs, bucketSharedChunks, bucketSharedEnds, bucketShareOwners, bucketSharedFence,
	bucketSharedRefs,
}

func shareStateKey(id TopicID, partition int32) []byte {
	b := make([]byte, 0, 20)
	b = append(b, id[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

// offsetValue is one committed offset as stored (encodeOffsetValue).
type offsetValue struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  int64 // unix milliseconds, from the proposer
	// Rev is the revision (raft index) that stored the commit; 0 for
	// commits stored before values carried it (version 1).
	Rev uint64
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func getU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func brokerKey(id int32) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(id))
	return b
}

func brokerFromKey(b []byte) int32 { return int32(binary.BigEndian.Uint32(b)) }

func offsetKey(topic string, partition int32) []byte {
	b := make([]byte, 0, len(topic)+5)
	b = append(b, topic...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

func parseOffsetKey(k []byte) (string, int32, bool) {
	if len(k) < 5 || k[len(k)-5] != 0 {
		return "", 0, false
	}
	return string(k[:len(k)-5]), int32(binary.BigEndian.Uint32(k[len(k)-4:])), true
}

func configBrokerKey(id int32) string { return strconv.Itoa(int(id)) }

// shareOwnerKey is the share_owners key of one share-partition; every key
// of a group starts with shareOwnerPrefix(group).
func shareOwnerKey(group string, id TopicID, partition int32) []byte {
	b := shareOwnerPrefix(group)
	b = append(b, id[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

func shareOwnerPrefix(group string) []byte {
	b := make([]byte, 0, 2+len(group)+20)
	b = binary.BigEndian.AppendUint16(b, uint16(len(group)))
	return append(b, group...)
}
