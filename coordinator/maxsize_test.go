package coordinator

import (
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metastore"
)

// newSizedEnv is newEnv with group.max.size and group.consumer.max.size.
func newSizedEnv(t *testing.T, classic, consumer int, topics ...metastore.Topic) *env {
	t.Helper()
	e := &env{t: t, clock: NewFakeClock(), store: newMemStore(topics...)}
	c, err := New(Config{BrokerID: 1, Store: e.store, Clock: e.clock, MaxGroupSize: classic, ConsumerMaxGroupSize: consumer,
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e.c = c
	return e
}

// TestGroupMaxSize: a classic group at group.max.size refuses a new
// member with GROUP_MAX_SIZE_REACHED, counting members still pending
// their second join (KIP-394), while its members rejoin freely; a
// departure makes room.
func TestGroupMaxSize(t *testing.T) {
	e := newSizedEnv(t, 2, 0)
	a, ja := e.joinNew("g")
	ra := e.wait(ja)
	if ra.ErrorCode != 0 {
		t.Fatalf("a: %d", ra.ErrorCode)
	}
	e.sync("g", a, ra.Generation, nil, map[string]string{a: "A"})
	// b is pending (MEMBER_ID_REQUIRED): it counts.
	rb := e.join(9, "g", "", nil)
	if rb.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("b first join: %d", rb.ErrorCode)
	}
	if r := e.join(9, "g", "", nil); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("third member: code %d, want GROUP_MAX_SIZE_REACHED", r.ErrorCode)
	}
	// A v0 join (no pending step) is refused the same way.
	if r := e.join(0, "g", "", nil); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("third member v0: code %d, want GROUP_MAX_SIZE_REACHED", r.ErrorCode)
	}
	// The pending member completes its join and a rejoins: both members.
	jb := e.joinAsync(9, "g", rb.MemberID, nil)
	if !pending(jb) {
		t.Fatal("b's join answered before a rejoined")
	}
	ja = e.joinAsync(9, "g", a, nil)
	if r := e.wait(jb); r.ErrorCode != 0 {
		t.Fatalf("b second join: %d", r.ErrorCode)
	}
	if r := e.wait(ja); r.ErrorCode != 0 {
		t.Fatalf("a rejoin: %d", r.ErrorCode)
	}
	if r := e.join(9, "g", "", nil); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("third member with two joined: code %d", r.ErrorCode)
	}
}

// TestConsumerGroupMaxSize: a KIP-848 group at group.consumer.max.size
// refuses a new member's first heartbeat with GROUP_MAX_SIZE_REACHED and
// Kafka's message; members keep heartbeating.
func TestConsumerGroupMaxSize(t *testing.T) {
	e := newSizedEnv(t, 0, 2, topic("x", 4, 1))
	ms := []*cgMember{{id: "m1"}, {id: "m2"}, {id: "m3"}}
	for _, m := range ms[:2] {
		if r := e.cgHeartbeat(m, []string{"x"}, ""); r.ErrorCode != 0 {
			t.Fatalf("%s: %d", m.id, r.ErrorCode)
		}
	}
	r := e.cgHeartbeat(ms[2], []string{"x"}, "")
	if r.ErrorCode != kerr.GroupMaxSizeReached.Code || r.ErrorMessage == nil ||
		*r.ErrorMessage != "The consumer group has reached its maximum capacity of 2 members." {
		t.Fatalf("third member: code %d message %v", r.ErrorCode, r.ErrorMessage)
	}
	if r := e.cgHeartbeat(ms[0], []string{"x"}, ""); r.ErrorCode != 0 {
		t.Fatalf("member heartbeat at capacity: %d", r.ErrorCode)
	}
}
