package metastore

import (
	"context"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Transport carries raft messages between metastore nodes and requests from
// brokers (and from followers forwarding to the leader) to a node. Open uses
// the TCP transport (tcp.go) unless Config.Transport is set; tests use the
// in-memory Hub (memtransport.go), which can drop, delay, duplicate and
// partition.
type Transport interface {
	// Start begins delivering inbound traffic to h. Called once by Open.
	Start(h Handler) error
	// Send queues raft messages for their destinations (m.To). It MUST NOT
	// block and may drop messages: raft retries. A MsgSnap carries the
	// snapshot image in Snapshot.Data; once it is delivered or lost the
	// transport calls h.ReportSnapshot.
	Send(msgs []*pb.Message)
	// Call sends req to node `to` and waits for its response or ctx. An
	// error means the transport failed (ErrUnreachable); an application
	// error travels in Response.Err.
	Call(ctx context.Context, to uint64, req *Request) (*Response, error)
	// AddPeer and RemovePeer follow raft membership.
	AddPeer(id uint64, addr string)
	RemovePeer(id uint64)
	// Close stops the transport; Send and Call fail afterwards.
	Close() error
}

// Handler is what a transport delivers to: the node.
type Handler interface {
	// HandleRaft steps one inbound raft message. It must not block for
	// long (the node hands it to raft's Step).
	HandleRaft(m *pb.Message)
	// HandleRequest serves a request and returns its response.
	HandleRequest(ctx context.Context, req *Request) *Response
	// ReportUnreachable and ReportSnapshot feed raft's flow control.
	ReportUnreachable(id uint64)
	ReportSnapshot(id uint64, ok bool)
}

// Request is one call on a node's internal API. Its JSON form is what the
// TCP transport carries.
type Request struct {
	Kind string `json:"k"` // see the req* constants

	Cmd  *command     `json:"cmd,omitempty"`
	Read *readRequest `json:"read,omitempty"`

	// Watch: events after FromRev, waiting up to WaitMs for one.
	FromRev uint64 `json:"from,omitempty"`
	WaitMs  int64  `json:"wait,omitempty"`

	// Heartbeat.
	BrokerID int32  `json:"bid,omitempty"`
	Inc      uint64 `json:"inc,omitempty"`

	// AddVoter, RemoveVoter.
	NodeID uint64 `json:"node,omitempty"`
	Addr   string `json:"addr,omitempty"`

	// Hops counts forwards, so a confused cluster cannot loop a request.
	Hops int `json:"hops,omitempty"`
	// TimeoutMs carries the caller's remaining deadline across the wire.
	TimeoutMs int64 `json:"tmo,omitempty"`
}

const (
	reqCmd         = "cmd"
	reqRead        = "read"
	reqHeartbeat   = "heartbeat"
	reqWatch       = "watch"
	reqAddVoter    = "add_voter"
	reqRemoveVoter = "remove_voter"
	reqStatus      = "status"
)

type readRequest struct {
	What  string           `json:"what"` // "offsets", "group", "groups", "topic", "barrier", "txn", "txns"
	Group string           `json:"g,omitempty"`
	TPs   []TopicPartition `json:"tps,omitempty"`
	Name  string           `json:"name,omitempty"`
	// Since and Max bound "offsets_since": commits stored after
	// revision Since, at most about Max of them.
	Since uint64 `json:"since,omitempty"`
	Max   int    `json:"max,omitempty"`
	// TopicID and Partition name the partition of "shared_chunks" (From
	// is its offset, Max bounds its chunks) and the share-partition of
	// "share_owner".
	TopicID   *TopicID `json:"tid,omitempty"`
	Partition int32    `json:"p,omitempty"`
	From      int64    `json:"from,omitempty"`
	// Keys are the objects "shared_unreferenced" asks about.
	Keys []string `json:"keys,omitempty"`
}

// Response answers a Request.
type Response struct {
	Err    string  `json:"err,omitempty"` // errCode
	Result *result `json:"res,omitempty"`

	Offsets []OffsetCommit `json:"offs,omitempty"`
	// GroupOffsets answers "offsets_since".
	GroupOffsets []GroupOffsetCommit `json:"goffs,omitempty"`
	State        []byte              `json:"state,omitempty"`
	Groups       []string            `json:"groups,omitempty"`
	Topic        *Topic              `json:"topic,omitempty"`
	Found        bool                `json:"found,omitempty"`
	Txns         []TxnState          `json:"txns,omitempty"`
	// ShareStates answers "share_states".
	ShareStates []ShareState `json:"shares,omitempty"`
	// Shared answers "shared_chunks".
	Shared *SharedPartition `json:"shared,omitempty"`
	// Keys answers "shared_unreferenced".
	Keys []string `json:"keys,omitempty"`

	Events []event `json:"events,omitempty"`
	Image  *image  `json:"image,omitempty"`
	Rev    uint64  `json:"rev,omitempty"`
	Status *Status `json:"status,omitempty"`
	// Watch answers name the leader and its internal address, so a remote
	// client can send writes straight to it.
	Leader     uint64 `json:"leader,omitempty"`
	LeaderAddr string `json:"leader_addr,omitempty"`
}

func errResponse(err error) *Response { return &Response{Err: errCode(err)} }
