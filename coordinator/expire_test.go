package coordinator

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchOffset is the group's committed offset of t-0, as OffsetFetch
// answers it (-1: none).
func (e *env) fetchOffset(group, topic string) int64 {
	e.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	resp := e.c.OffsetFetch(context.Background(), req)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		e.t.Fatalf("offset fetch %s: %+v", group, resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

func (e *env) expire() int {
	e.t.Helper()
	n, err := e.c.ExpireOffsets(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestOffsetExpiryEmptyClassicGroup: a classic group's offsets expire
// offsets.retention.minutes after the group became Empty, however old the
// commit; then the group, Empty without offsets, is deleted.
func TestOffsetExpiryEmptyClassicGroup(t *testing.T) {
	e := newEnv(t, topic("t", 1, 1))
	ctx := context.Background()
	retention := 10080 * time.Minute
	// Committed now; five days later a consumer joins and leaves, so the
	// group became Empty then.
	if c := e.c.OffsetCommit(ctx, commitReq(2, "g", "", nil, "t", -1, 42)).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("commit: %d", c)
	}
	e.clock.Advance(5 * 24 * time.Hour)
	id, ch := e.joinNew("g")
	r := e.wait(ch)
	e.sync("g", id, r.Generation, nil, map[string]string{id: "A"})
	if n := e.expire(); n != 0 {
		t.Fatalf("a Stable group's subscribed offsets expired: %d", n)
	}
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version = 3
	lr.Group = "g"
	lr.Members = []kmsg.LeaveGroupRequestMember{{MemberID: id}}
	if resp := e.c.LeaveGroup(ctx, lr); resp.ErrorCode != 0 {
		t.Fatalf("leave: %+v", resp)
	}
	// Seven days after the commit, two after the group became Empty:
	// kept, since retention counts from when the group became Empty.
	e.clock.Advance(2 * 24 * time.Hour)
	if n := e.expire(); n != 0 || e.fetchOffset("g", "t") != 42 {
		t.Fatalf("expired %d two days after the group became Empty", n)
	}
	e.clock.Advance(retention - 2*24*time.Hour - time.Minute)
	if n := e.expire(); n != 0 {
		t.Fatalf("expired %d a minute before retention", n)
	}
	e.clock.Advance(time.Minute)
	if n := e.expire(); n != 1 {
		t.Fatalf("expired %d at retention, want 1", n)
	}
	if got := e.fetchOffset("g", "t"); got != -1 {
		t.Fatalf("offset fetch after expiry: %d, want -1", got)
	}
	if groups, _ := e.store.ListGroups(ctx); slices.Contains(groups, "g") {
		t.Fatalf("the Empty group without offsets was not deleted: %v", groups)
	}
}

// TestOffsetExpirySimpleCommits: offsets of a group without a protocol
// type (a standalone consumer's commits) expire retention after their own
// commit time, each on its own.
func TestOffsetExpirySimpleCommits(t *testing.T) {
	e := newEnv(t, topic("t", 1, 1), topic("u", 1, 2))
	ctx := context.Background()
	e.c.OffsetCommit(ctx, commitReq(2, "s", "", nil, "t", -1, 5))
	e.clock.Advance(time.Hour)
	e.c.OffsetCommit(ctx, commitReq(2, "s", "", nil, "u", -1, 6))
	e.clock.Advance(10080*time.Minute - time.Hour)
	if n := e.expire(); n != 1 || e.fetchOffset("s", "t") != -1 || e.fetchOffset("s", "u") != 6 {
		t.Fatalf("at t's retention: expired %d, t %d, u %d; want t gone, u kept", n, e.fetchOffset("s", "t"), e.fetchOffset("s", "u"))
	}
	e.clock.Advance(time.Hour)
	if n := e.expire(); n != 1 || e.fetchOffset("s", "u") != -1 {
		t.Fatalf("at u's retention: expired %d", n)
	}
}

// TestOffsetExpiryConfig: a shorter retention applies; a negative one keeps
// offsets forever; another broker's groups are left to it.
func TestOffsetExpiryConfig(t *testing.T) {
	for _, tc := range []struct {
		retention time.Duration
		after     time.Duration
		want      int
	}{
		{time.Minute, time.Minute, 1},
		{time.Minute, time.Minute - time.Millisecond, 0},
		{-1, 365 * 24 * time.Hour, 0},
	} {
		e := newEnv(t, topic("t", 1, 1))
		c, err := New(Config{BrokerID: 1, Store: e.store, Clock: e.clock, OffsetsRetention: tc.retention,
			Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
		if err != nil {
			t.Fatal(err)
		}
		e.c.Close()
		e.c = c
		t.Cleanup(func() { c.Close() })
		c.OffsetCommit(context.Background(), commitReq(2, "s", "", nil, "t", -1, 5))
		e.clock.Advance(tc.after)
		if n := e.expire(); n != tc.want {
			t.Errorf("retention %v, after %v: expired %d, want %d", tc.retention, tc.after, n, tc.want)
		}
	}
}
