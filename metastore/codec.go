package metastore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Compact binary entry format (entryFormatBinary), used for every proposal
// batch; offset commits, the hot path, get a binary form and everything else
// travels as JSON inside it:
//
//	u8      2 (entryFormatBinary)
//	u64     proposer node id (big-endian)
//	u64     proposer nonce (big-endian)
//	uvarint command count
//	per command:
//	  uvarint seq
//	  u8      kind: 0 = JSON command follows, 1 = commit_offsets,
//	          2 = commit_offsets with a fence, 3 = commit_offsets with a
//	          fence and the coordinator's write sequence
//	  kind 0: uvarint length, JSON of command
//	  kind 1: string group, uvarint n, n times:
//	          string topic, varint partition, varint offset,
//	          varint leader epoch, string metadata, varint commit time (unix ms)
//	  kind 2: varint broker, uvarint incarnation, then as kind 1
//	  kind 3: varint broker, uvarint incarnation, uvarint write sequence,
//	          then as kind 1 (a member of a version before kind 3 cannot
//	          decode it: upgrade every meta node before the brokers)
//
// where string is uvarint length + bytes. The decoder is sticky (franz-go
// kbin style): reads past the end set an error checked once; lengths are
// checked against the remaining bytes before anything is allocated.
const entryFormatBinary byte = 2

func encodeBatchBinary(b *proposalBatch) []byte {
	out := make([]byte, 0, 64+len(b.Cmds)*64)
	out = append(out, entryFormatBinary)
	out = binary.BigEndian.AppendUint64(out, b.Node)
	out = binary.BigEndian.AppendUint64(out, b.Nonce)
	out = binary.AppendUvarint(out, uint64(len(b.Cmds)))
	for i := range b.Cmds {
		c := &b.Cmds[i]
		out = binary.AppendUvarint(out, c.Seq)
		if c.Op == opCommitOffsets {
			if c.WriteSeq != 0 {
				out = append(out, 3)
				out = binary.AppendVarint(out, int64(c.BrokerID))
				out = binary.AppendUvarint(out, c.Inc)
				out = binary.AppendUvarint(out, c.WriteSeq)
			} else if c.Inc != 0 {
				out = append(out, 2)
				out = binary.AppendVarint(out, int64(c.BrokerID))
				out = binary.AppendUvarint(out, c.Inc)
			} else {
				out = append(out, 1)
			}
			out = appendString(out, c.Group)
			out = binary.AppendUvarint(out, uint64(len(c.Offsets)))
			for _, o := range c.Offsets {
				out = appendString(out, o.Topic)
				out = binary.AppendVarint(out, int64(o.Partition))
				out = binary.AppendVarint(out, o.Offset)
				out = binary.AppendVarint(out, int64(o.LeaderEpoch))
				out = appendString(out, o.Metadata)
				out = binary.AppendVarint(out, o.CommitTime.UnixMilli())
			}
			continue
		}
		js, err := json.Marshal(c)
		if err != nil {
			panic(fmt.Sprintf("metastore: encode command: %v", err))
		}
		out = append(out, 0)
		out = binary.AppendUvarint(out, uint64(len(js)))
		out = append(out, js...)
	}
	return out
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("metastore: truncated entry")

func (r *reader) fail() {
	if r.err == nil {
		r.err = errShort
	}
	r.b = nil
}

func (r *reader) u8() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string { return string(r.bytes()) }

// count reads an element count, refusing one that cannot fit in what is
// left (each element takes at least min bytes).
func (r *reader) count(min int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/min) {
		r.fail()
		return 0
	}
	return int(n)
}

func decodeBatchBinary(data []byte) (*proposalBatch, error) {
	r := &reader{b: data}
	if r.u8() != entryFormatBinary {
		return nil, errors.New("metastore: not a binary entry")
	}
	b := &proposalBatch{Node: r.u64(), Nonce: r.u64()}
	n := r.count(2)
	b.Cmds = make([]command, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		seq := r.uvarint()
		switch kind := r.u8(); kind {
		case 0:
			js := r.bytes()
			if r.err != nil {
				break
			}
			var c command
			if err := json.Unmarshal(js, &c); err != nil {
				return nil, fmt.Errorf("metastore: decode command: %w", err)
			}
			c.Seq = seq
			b.Cmds = append(b.Cmds, c)
		case 1, 2, 3:
			c := command{Seq: seq, Op: opCommitOffsets}
			if kind >= 2 {
				c.BrokerID, c.Inc = int32(r.varint()), r.uvarint()
			}
			if kind == 3 {
				c.WriteSeq = r.uvarint()
			}
			c.Group = r.str()
			m := r.count(6)
			c.Offsets = make([]OffsetCommit, 0, m)
			for j := 0; j < m && r.err == nil; j++ {
				var o OffsetCommit
				o.Topic = r.str()
				o.Partition = int32(r.varint())
				o.Offset = r.varint()
				o.LeaderEpoch = int32(r.varint())
				o.Metadata = r.str()
				o.CommitTime = time.UnixMilli(r.varint()).UTC()
				c.Offsets = append(c.Offsets, o)
			}
			b.Cmds = append(b.Cmds, c)
		default:
			r.fail()
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, errors.New("metastore: trailing bytes in entry")
	}
	return b, nil
}

// Stored offset value (bucket offsets): u8 version (1 or 2), varint
// offset, varint leader epoch, varint commit time (unix ms), from version 2
// uvarint revision (the raft index that stored it, which orders commits
// for the __consumer_offsets view), then the metadata string's bytes to
// the end. Version 1 values (no revision) are still read.
func encodeOffsetValue(v offsetValue) []byte {
	b := make([]byte, 0, 34+len(v.Metadata))
	b = append(b, 2)
	b = binary.AppendVarint(b, v.Offset)
	b = binary.AppendVarint(b, int64(v.LeaderEpoch))
	b = binary.AppendVarint(b, v.CommitTime)
	b = binary.AppendUvarint(b, v.Rev)
	return append(b, v.Metadata...)
}

func decodeOffsetValue(b []byte) (offsetValue, error) {
	r := &reader{b: b}
	version := r.u8()
	if version != 1 && version != 2 {
		return offsetValue{}, errors.New("metastore: unknown offset value version")
	}
	v := offsetValue{Offset: r.varint(), LeaderEpoch: int32(r.varint()), CommitTime: r.varint()}
	if version == 2 {
		v.Rev = r.uvarint()
	}
	if r.err != nil {
		return offsetValue{}, r.err
	}
	v.Metadata = string(r.b)
	return v, nil
}
