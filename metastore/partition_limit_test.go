package metastore

import (
	"errors"
	"testing"
)

// TestPartitionLimitApplied: the limit a client stamps on its creations
// is checked where they are applied, against what the metastore holds
// then, not against what the proposer saw: a second client whose own
// view would let it through is refused, for a topic and for partitions
// added to one, and a client without a limit (a command from before it)
// is not bound.
func TestPartitionLimitApplied(t *testing.T) {
	n := openSingle(t, t.TempDir())
	ctx := ctxT(t)
	a, b := n.Client(), n.Client()
	a.SetPartitionLimit(10)
	b.SetPartitionLimit(10)
	if _, err := a.CreateTopic(ctx, TopicSpec{Name: "a", Partitions: 6, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "b", Partitions: 6, ReplicationFactor: -1}); !errors.Is(err, ErrPartitionLimit) {
		t.Fatalf("6 more partitions past a limit of 10: %v, want ErrPartitionLimit", err)
	}
	if _, ok := b.TopicByName("b"); ok {
		t.Fatal("the refused topic exists")
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "b", Assignment: [][]int32{{1}, {1}, {1}, {1}, {1}}}); !errors.Is(err, ErrPartitionLimit) {
		t.Fatalf("an assignment of 5 partitions past a limit of 10: %v, want ErrPartitionLimit", err)
	}
	if _, err := b.CreatePartitions(ctx, "a", 11); !errors.Is(err, ErrPartitionLimit) {
		t.Fatalf("growing to 11 partitions past a limit of 10: %v, want ErrPartitionLimit", err)
	}
	if _, err := b.CreatePartitions(ctx, "a", 10); err != nil {
		t.Fatalf("growing to exactly the limit: %v", err)
	}
	unbounded := n.Client()
	if _, err := unbounded.CreateTopic(ctx, TopicSpec{Name: "c", Partitions: 3, ReplicationFactor: -1}); err != nil {
		t.Fatalf("a creation without a limit: %v", err)
	}
	if tp, _ := a.TopicByName("a"); len(tp.Partitions) != 10 {
		t.Fatalf("topic a has %d partitions, want 10", len(tp.Partitions))
	}
}
