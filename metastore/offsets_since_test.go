package metastore

import (
	"fmt"
	"testing"
	"time"
)

// TestOffsetValueVersions: version 2 values carry the revision; version 1
// values (stored before) still decode, with revision 0.
func TestOffsetValueVersions(t *testing.T) {
	v := offsetValue{Offset: 5, LeaderEpoch: -1, Metadata: "m\x00x", CommitTime: 12, Rev: 1 << 40}
	if got, err := decodeOffsetValue(encodeOffsetValue(v)); err != nil || got != v {
		t.Fatalf("v2: %+v %v", got, err)
	}
	// Version 1: u8 1, varint 5, varint -1, varint 12, metadata.
	v1 := []byte{1, 10, 1, 24, 'm'}
	if got, err := decodeOffsetValue(v1); err != nil || got != (offsetValue{Offset: 5, LeaderEpoch: -1, CommitTime: 12, Metadata: "m"}) {
		t.Fatalf("v1: %+v %v", got, err)
	}
	for _, bad := range [][]byte{{3, 10, 1, 24}, {}, {2, 10, 1}} {
		if _, err := decodeOffsetValue(bad); err == nil {
			t.Errorf("%x decoded", bad)
		}
	}
}

// FuzzDecodeOffsetValue: no panic on arbitrary bytes, and what decodes
// re-encodes (as version 2) to the same value.
func FuzzDecodeOffsetValue(f *testing.F) {
	f.Add(encodeOffsetValue(offsetValue{Offset: 9, LeaderEpoch: 2, CommitTime: 1700000000000, Rev: 77, Metadata: "x"}))
	f.Add([]byte{1, 10, 1, 24, 'm'})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := decodeOffsetValue(data)
		if err != nil {
			return
		}
		got, err := decodeOffsetValue(encodeOffsetValue(v))
		if err != nil || got != v {
			t.Fatalf("re-decode %+v: %+v %v", v, got, err)
		}
	})
}

// TestOffsetsSince: every group's commits after a revision, in revision
// order, bounded at a revision boundary; a commit of the same key again
// comes back with its new revision.
func TestOffsetsSince(t *testing.T) {
	n := openSingle(t, t.TempDir())
	defer n.Close()
	c := n.Client()
	ctx := ctxT(t)
	commit := func(group string, offs ...OffsetCommit) {
		t.Helper()
		if err := c.CommitOffsets(ctx, Fence{}, group, offs); err != nil {
			t.Fatal(err)
		}
	}
	at := time.UnixMilli(1700000000000).UTC()
	commit("b", OffsetCommit{TopicPartition: TopicPartition{"t", 0}, Offset: 1, CommitTime: at},
		OffsetCommit{TopicPartition: TopicPartition{"t", 1}, Offset: 2, CommitTime: at})
	commit("a", OffsetCommit{TopicPartition: TopicPartition{"t", 0}, Offset: 3, Metadata: "m", CommitTime: at})
	all, rev, err := c.OffsetsSince(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].Group != "b" || all[1].Group != "b" || all[2].Group != "a" ||
		all[0].Rev != all[1].Rev || all[2].Rev <= all[0].Rev || rev < all[2].Rev ||
		all[2].Offset != 3 || all[2].Metadata != "m" || !all[2].CommitTime.Equal(at) {
		t.Fatalf("since 0: %+v at %d", all, rev)
	}
	// Max 1 still returns both commits of b's revision.
	part, _, err := c.OffsetsSince(ctx, 0, 1)
	if err != nil || len(part) != 2 {
		t.Fatalf("max 1: %+v %v", part, err)
	}
	none, _, err := c.OffsetsSince(ctx, rev, 0)
	if err != nil || len(none) != 0 {
		t.Fatalf("since %d: %+v %v", rev, none, err)
	}
	commit("b", OffsetCommit{TopicPartition: TopicPartition{"t", 1}, Offset: 4, CommitTime: at})
	later, _, err := c.OffsetsSince(ctx, rev, 0)
	if err != nil || len(later) != 1 || later[0].Group != "b" || later[0].Partition != 1 || later[0].Offset != 4 || later[0].Rev <= rev {
		t.Fatalf("since %d after a new commit: %s %v", rev, fmt.Sprint(later), err)
	}
}
