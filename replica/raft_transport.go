package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/partition"
)

// NodeID is a broker id. Raft ids are NodeID+1, because raft reserves 0.
type NodeID = partition.NodeID

func raftID(n NodeID) uint64  { return uint64(n) + 1 }
func nodeOf(id uint64) NodeID { return NodeID(id - 1) }
func raftIDs(ns []NodeID) []uint64 {
	out := make([]uint64, len(ns))
	for i, n := range ns {
		out[i] = raftID(n)
	}
	return out
}

// Envelope is one raft message of one partition's group.
type Envelope struct {
	Group Key
	Msg   *raftpb.Message
}

// Transport carries raft messages between the hosts of different brokers:
// one stream per peer broker for the messages of every group.
//
// Send never blocks and may drop: when a peer's bounded queue is full, or
// the peer is unreachable, messages are discarded and counted, and raft
// retries (etcd's rafthttp Transporter: "Sending messages MUST NOT block").
// The caller gives up msgs; the transport may hold them until written.
// Handle installs the receiver, called from the transport's goroutines with
// batches in the order the peer sent them; it must not block for long.
type Transport interface {
	Send(to NodeID, msgs []Envelope)
	Handle(func(from NodeID, msgs []Envelope))
	Close() error
}

// maxFrameBytes bounds one frame on the wire; a peer sending more is cut
// off.
const maxFrameBytes = 64 << 20

var errBadFrame = errors.New("replica: malformed raft transport frame")

// encodeFrame serialises a batch of envelopes as
//
//	frameLen u32 | count u32 | count × (topicID [16]byte | partition i32 | msgLen u32 | raftpb.Message)
//
// frameLen counts the bytes after itself.
func encodeFrame(dst []byte, msgs []Envelope) ([]byte, error) {
	body, err := encodeEnvelopes(nil, msgs)
	if err != nil {
		return dst, err
	}
	return appendFrame(dst, [][]byte{body}, len(msgs))
}

// encodeEnvelopes appends the envelopes' encodings (the repeated part of a
// frame) to dst.
//
// It sizes every message first and grows dst once: appending each
// message's encoding to a slice grown as it goes copied every frame
// about twice over (a MsgApp carries its entries' batches, so the copies
// were most of what a write broker allocated under a produce load). The
// marshal then reuses the sizes just computed.
func encodeEnvelopes(dst []byte, msgs []Envelope) ([]byte, error) {
	start := len(dst)
	n := 0
	for _, e := range msgs {
		n += envelopeHeaderBytes + proto.Size(e.Msg)
	}
	dst = slices.Grow(dst, n)
	for _, e := range msgs {
		dst = append(dst, e.Group.TopicID[:]...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.Group.Index))
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		var err error
		dst, err = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, e.Msg)
		if err != nil {
			return dst[:start], err
		}
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	}
	return dst, nil
}

// envelopeHeaderBytes is an envelope's bytes before its message: topic
// id, partition and the message's length.
const envelopeHeaderBytes = 16 + 4 + 4

// appendFrame appends one frame holding count envelopes already encoded in
// bodies.
func appendFrame(dst []byte, bodies [][]byte, count int) ([]byte, error) {
	n := 4
	for _, b := range bodies {
		n += len(b)
	}
	if n > maxFrameBytes {
		return dst, fmt.Errorf("replica: raft frame of %d bytes exceeds %d", n, maxFrameBytes)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = binary.BigEndian.AppendUint32(dst, uint32(count))
	for _, b := range bodies {
		dst = append(dst, b...)
	}
	return dst, nil
}

// decodeFrame parses a frame body (after frameLen).
func decodeFrame(b []byte) ([]Envelope, error) {
	if len(b) < 4 {
		return nil, errBadFrame
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b))/24 {
		return nil, errBadFrame
	}
	out := make([]Envelope, 0, n)
	for range n {
		if len(b) < 24 {
			return nil, errBadFrame
		}
		var e Envelope
		copy(e.Group.TopicID[:], b)
		e.Group.Index = int32(binary.BigEndian.Uint32(b[16:]))
		l := binary.BigEndian.Uint32(b[20:])
		b = b[24:]
		if uint64(l) > uint64(len(b)) {
			return nil, errBadFrame
		}
		e.Msg = &raftpb.Message{}
		if err := proto.Unmarshal(b[:l], e.Msg); err != nil {
			return nil, fmt.Errorf("%w: %v", errBadFrame, err)
		}
		b = b[l:]
		out = append(out, e)
	}
	if len(b) != 0 {
		return nil, errBadFrame
	}
	return out, nil
}
