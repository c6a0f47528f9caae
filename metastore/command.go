package metastore

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluice-broker/sluice/acl"
)

// Command encoding (the Data of every normal raft entry this package
// proposes): byte 0 is the format.
//
//	1  JSON of proposalBatch follows (decoded, no longer written).
//	2  compact binary (codec.go): offset commits in binary, any other
//	   command as JSON inside it. This is what encodeBatch writes.
//
// A proposalBatch carries the proposing node's id and a per-process random
// nonce, and one or more commands, each with a sequence number unique
// within that process. Every node applies every command; only the node whose
// (node, nonce) match hands the results to its waiting callers. Many
// concurrent requests (above all offset commits) are grouped into one
// batch, so one raft entry and one bbolt transaction serve all of them.
//
// Commands are deterministic: anything random or time-dependent (topic ids,
// commit times, the cluster id) is chosen by the proposer and carried in
// the command, never computed in apply.
const entryFormatJSON byte = 1

type proposalBatch struct {
	Node  uint64    `json:"n"`
	Nonce uint64    `json:"x"`
	Cmds  []command `json:"c"`
}

// op names a command.
type op string

const (
	opInitCluster       op = "init_cluster"
	opSetBrokerLease    op = "set_broker_lease"
	opCreateTopic       op = "create_topic"
	opDeleteTopic       op = "delete_topic"
	opCreatePartitions  op = "create_partitions"
	opAlterTopicConfigs op = "alter_topic_configs"
	opAlterBrokerConfig op = "alter_broker_configs"
	opSetLeader         op = "set_partition_leader"
	// opSetLeaders is set_partition_leader for many partitions of one
	// topic in one command: one decode, one write and one watch event
	// for the topic instead of one per partition.
	opSetLeaders        op = "set_partition_leaders"
	opAllocProducerIDs  op = "alloc_producer_ids"
	opRegisterBroker    op = "register_broker"
	opExpireBroker      op = "expire_broker"
	opUnregisterBroker  op = "unregister_broker"
	opShutdownBroker    op = "shutdown_broker"
	opCommitOffsets     op = "commit_offsets"
	opDeleteOffsets     op = "delete_offsets"
	opSaveGroup         op = "save_group"
	opDeleteGroup       op = "delete_group"
	opClaimGroup        op = "claim_group"
	opCreateACLs        op = "create_acls"
	opDeleteACLs        op = "delete_acls"
	opNoop              op = "noop"
	opAlterScram        op = "alter_scram"
	opClaimDirectory    op = "claim_directory"
	opAlterClientQuotas op = "alter_client_quotas"
	opPutTxn            op = "put_txn"
	opDeleteTxn         op = "delete_txn"
	opTxnOffsets        op = "txn_offsets"
	opSaveShareState    op = "save_share_state"
	opAlterGroupConfigs op = "alter_group_configs"
	opClaimShare        op = "claim_share_partition"
	opReleaseShare      op = "release_share_partition"
)

// command is one state machine operation. Only the fields its Op uses are
// set.
type command struct {
	Seq uint64 `json:"s,omitempty"`
	Op  op     `json:"op"`

	ClusterID string `json:"cid,omitempty"`
	// LeaseMs: the broker lease (init_cluster, set_broker_lease).
	LeaseMs   int64             `json:"lease_ms,omitempty"`
	Spec      *TopicSpec        `json:"spec,omitempty"`
	TopicID   *TopicID          `json:"tid,omitempty"`
	Name      string            `json:"name,omitempty"`
	Partition int32             `json:"p,omitempty"`
	Total     int32             `json:"total,omitempty"`
	Set       map[string]string `json:"set,omitempty"`
	Del       []string          `json:"del,omitempty"`
	Broker    *Broker           `json:"broker,omitempty"`
	BrokerID  int32             `json:"bid,omitempty"`
	Inc       uint64            `json:"inc,omitempty"`
	Leader    int32             `json:"leader,omitempty"`
	Epoch     int32             `json:"epoch,omitempty"`
	// ISR is set_partition_leader's in-sync replicas (nil: not reported).
	ISR []int32 `json:"isr,omitempty"`
	// Leaders is set_partition_leaders' changes, each applied as a
	// set_partition_leader of its partition would be.
	Leaders []LeaderChange `json:"ldrs,omitempty"`
	Group   string         `json:"g,omitempty"`
	Offsets []OffsetCommit `json:"offs,omitempty"`
	// WriteSeq orders a fenced commit_offsets among the commits of the
	// same coordinator (BrokerID, Inc): apply refuses one below the last
	// it applied for the group (ErrOvertaken; apply.go).
	WriteSeq uint64           `json:"wseq,omitempty"`
	TPs      []TopicPartition `json:"tps,omitempty"`
	State    []byte           `json:"state,omitempty"`
	Count    int64            `json:"count,omitempty"`
	// Target is a reassignment's voter set; Cancel and FixedRF qualify
	// alter_reassignment (reassign.go).
	Target  []int32 `json:"tgt,omitempty"`
	Cancel  bool    `json:"cancel,omitempty"`
	FixedRF bool    `json:"frf,omitempty"`
	// MaxPartitions is the proposer's max.partitions on create_topic
	// and create_partitions: the command fails with ErrPartitionLimit
	// when the cluster would then hold more partitions (0: no bound, as
	// a command from before it). Carried in the command so that every
	// member applies it alike, whatever its own configuration.
	MaxPartitions int64 `json:"maxp,omitempty"`
	// NowMs is the proposer's wall clock (unix ms). It is informational
	// (commit times, LeaseExpiry shown to operators); no decision compares
	// it with another node's clock.
	NowMs int64 `json:"now,omitempty"`
	// Scram is alter_scram's upsertions and deletions (scram.go).
	Scram []ScramCredential `json:"scram,omitempty"`
	// Quotas is alter_client_quotas' changes.
	Quotas []QuotaChange `json:"quotas,omitempty"`
	// ACLs are create_acls' bindings, ACLFilters delete_acls' filters
	// (acls.go).
	ACLs       []acl.Binding `json:"acls,omitempty"`
	ACLFilters []acl.Filter  `json:"aclf,omitempty"`
	// Txn, TxnEnd, ProducerID and ProducerEpoch are for the
	// transaction commands (txn.go).
	Txn           *TxnState `json:"txn,omitempty"`
	TxnEnd        int8      `json:"txe,omitempty"`
	ProducerID    int64     `json:"pid,omitempty"`
	ProducerEpoch int16     `json:"pep,omitempty"`
	// ShareClaim makes save_share_state fenced by the share-partition's
	// holder (claim_share_partition) instead of the group's owner.
	ShareClaim bool `json:"shc,omitempty"`
	// Claim is async_claim's claim (async.go).
	Claim *AsyncClaim `json:"claim,omitempty"`
	// Chunks is commit_shared_chunks' chunks (shared.go).
	Chunks []SharedChunk `json:"chunks,omitempty"`
	// Keys is condemn_shared_objects' object keys (shared.go).
	Keys []string `json:"keys,omitempty"`
	// Replace is replace_shared_chunks' chunks that Chunks' one merged
	// chunk replaces (shared.go).
	Replace []SharedChunk `json:"rpl,omitempty"`
}

// result is what applying one command produced.
type result struct {
	Err   string `json:"err,omitempty"` // errCode of a sentinel, or a message
	Rev   uint64 `json:"rev,omitempty"` // index of the entry that applied it
	Topic *Topic `json:"topic,omitempty"`
	Int   int64  `json:"int,omitempty"`
	Inc   uint64 `json:"inc,omitempty"`
	Owner int32  `json:"owner,omitempty"`
	// Visible says the command changed cache-visible state (topics,
	// brokers, broker configs, cluster id): a writer waits until its
	// cache reached Rev.
	Visible bool `json:"vis,omitempty"`
	// Deleted is delete_acls' answer: per filter, the bindings it
	// deleted.
	Deleted [][]acl.Binding `json:"dacl,omitempty"`
	// Errs is commit_shared_chunks' answer: an error code per chunk, ""
	// for a committed one.
	Errs []string `json:"errs,omitempty"`
	// Keys is advance_shared_start's and condemn_shared_objects'
	// answer: object keys (shared.go).
	Keys []string `json:"keys,omitempty"`
}

func encodeBatch(b *proposalBatch) []byte { return encodeBatchBinary(b) }

// encodeBatchJSON is format 1, still decoded (entries written by it may be
// in a log) but no longer written.
func encodeBatchJSON(b *proposalBatch) []byte {
	js, err := json.Marshal(b)
	if err != nil {
		panic(fmt.Sprintf("metastore: encode proposal: %v", err))
	}
	out := make([]byte, 0, len(js)+1)
	out = append(out, entryFormatJSON)
	return append(out, js...)
}

func decodeBatch(data []byte) (*proposalBatch, error) {
	if len(data) == 0 {
		return nil, nil // raft's empty entry at a new term
	}
	if data[0] == entryFormatBinary {
		return decodeBatchBinary(data)
	}
	if data[0] != entryFormatJSON {
		return nil, fmt.Errorf("metastore: unknown entry format %d", data[0])
	}
	var b proposalBatch
	if err := json.Unmarshal(data[1:], &b); err != nil {
		return nil, fmt.Errorf("metastore: decode entry: %w", err)
	}
	return &b, nil
}

// Error codes carried across the wire and in results. Each sentinel of
// errors.go has one; anything else travels as its message.
var errCodes = map[string]error{
	"topic_exists":      ErrTopicExists,
	"unknown_topic":     ErrUnknownTopic,
	"invalid_parts":     ErrInvalidPartitions,
	"partition_limit":   ErrPartitionLimit,
	"invalid_rf":        ErrInvalidReplicationFactor,
	"fenced":            ErrFenced,
	"not_leader":        ErrNotLeader,
	"stopped":           ErrStopped,
	"unknown_group":     ErrUnknownGroup,
	"unknown_broker":    ErrUnknownBroker,
	"invalid_request":   ErrInvalidRequest,
	"member_exists":     ErrMemberExists,
	"unknown_member":    ErrUnknownMember,
	"timeout":           ErrTimeout,
	"context_canceled":  errCtxCanceled,
	"context_deadline":  errCtxDeadline,
	"unreachable":       ErrUnreachable,
	"cluster_id_exists": errClusterIDSet,
	"no_reassignment":   ErrNoReassignment,
	"invalid_replicas":  ErrInvalidReplicaAssignment,
	"stale_master":      ErrStaleMaster,
	"master_alive":      ErrMasterAlive,
	"not_in_sync":       ErrNotInSync,
	"txn_conflict":      ErrTxnConflict,
	"txn_fenced":        ErrTxnFenced,
	"txn_producer":      ErrTxnUnknownProducer,
	"txn_concurrent":    ErrTxnConcurrent,
	"overtaken":         ErrOvertaken,
}

var (
	errCtxCanceled  = errors.New("context canceled")
	errCtxDeadline  = errors.New("context deadline exceeded")
	errClusterIDSet = errors.New("metastore: cluster id already set")
)

func errCode(err error) string {
	if err == nil {
		return ""
	}
	for code, e := range errCodes {
		if errors.Is(err, e) {
			return code
		}
	}
	return "msg:" + err.Error()
}

func codeErr(code string) error {
	if code == "" {
		return nil
	}
	if e, ok := errCodes[code]; ok {
		switch e {
		case errCtxCanceled:
			return ErrTimeout
		case errCtxDeadline:
			return ErrTimeout
		}
		return e
	}
	if len(code) > 4 && code[:4] == "msg:" {
		return errors.New(code[4:])
	}
	return errors.New(code)
}
