package metastore

import (
	"slices"
	"strings"
	"testing"
)

func TestClaimDirectory(t *testing.T) {
	n := openSingle(t, t.TempDir())
	c := n.Client()
	ctx := ctxT(t)
	registerBrokers(t, c, Broker{ID: 1, Role: RoleWrite}, Broker{ID: 2, Role: RoleWrite}, Broker{ID: 3, Role: RoleWrite}, Broker{ID: 4, Role: RoleRead})
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 2, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		broker  int32
		dir     string
		wantErr string
	}{
		{2, "dir-a", ""},           // first claim
		{2, "dir-a", ""},           // a restart
		{2, "dir-b", "voter of 2"}, // a new disk under a voter
		{2, "dir-a", ""},           // the old disk is back
		{4, "dir-r", ""},
		{4, "dir-s", "learner of 2"}, // a new disk under a learner
		{7, "dir-x", ""},             // no partitions: a new disk is fine
		{7, "dir-y", ""},
		{7, "", "invalid"},
	} {
		err := c.ClaimDirectory(ctx, step.broker, step.dir)
		switch {
		case step.wantErr == "" && err != nil:
			t.Fatalf("broker %d dir %q: %v", step.broker, step.dir, err)
		case step.wantErr != "" && (err == nil || !strings.Contains(err.Error(), step.wantErr)):
			t.Fatalf("broker %d dir %q: %v, want %q", step.broker, step.dir, err, step.wantErr)
		}
	}
}

// TestClaimDirectorySharedTopic: a new disk under a broker placed only on
// shared-mode partitions is fine: their data is in shared storage and
// the metastore, and the broker's disk held only a cache of it.
func TestClaimDirectorySharedTopic(t *testing.T) {
	n := openSingle(t, t.TempDir())
	c := n.Client()
	ctx := ctxT(t)
	registerBrokers(t, c, Broker{ID: 1, Role: RoleWrite}, Broker{ID: 2, Role: RoleWrite}, Broker{ID: 3, Role: RoleWrite}, Broker{ID: 4, Role: RoleRead})
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "s", Partitions: 2, ReplicationFactor: 3,
		Configs: map[string]string{"replication.mode": "shared"}}); err != nil {
		t.Fatal(err)
	}
	top, _ := c.TopicByName("s")
	if !slices.Contains(top.Partitions[0].Learners, 4) {
		t.Fatalf("the read broker is no learner of the shared partition (%+v): the test would not test the rule", top.Partitions[0])
	}
	for _, id := range []int32{2, 4} {
		if err := c.ClaimDirectory(ctx, id, "dir-a"); err != nil {
			t.Fatal(err)
		}
		if err := c.ClaimDirectory(ctx, id, "dir-b"); err != nil {
			t.Fatalf("broker %d on a new disk, placed only on shared partitions: %v", id, err)
		}
	}
}
