package metastore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/acl"
)

func topicACL(name string, pt acl.PatternType, principal string, op acl.Operation, perm acl.Permission) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: name, PatternType: pt,
		Principal: principal, Host: "*", Operation: op, Permission: perm}
}

// TestACLs stores, deduplicates and deletes bindings through an embedded
// and a remote client, checks the remote cache follows within a second,
// and that the bindings survive a restart.
func TestACLs(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, 1, dir)
	cfg.Listen = "127.0.0.1:0"
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	c := n.Client()
	rc, err := Dial(ctx, ClientConfig{Addrs: []string{n.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()

	a := topicACL("orders", acl.PatternLiteral, "User:alice", acl.OpRead, acl.Allow)
	b := topicACL("ord", acl.PatternPrefixed, "User:bob", acl.OpWrite, acl.Allow)
	d := topicACL("*", acl.PatternLiteral, "User:*", acl.OpAll, acl.Deny)
	gen0 := rc.ACLGeneration()
	if err := rc.CreateACLs(ctx, []acl.Binding{a, b, a}); err != nil {
		t.Fatal(err)
	}
	if _, got := rc.ACLs(); len(got) != 2 {
		t.Fatalf("remote cache after create: %v", got)
	}
	if rc.ACLGeneration() == gen0 {
		t.Fatal("the generation did not move")
	}
	// The other client's cache follows through the watch.
	if err := c.CreateACLs(ctx, []acl.Binding{d, b}); err != nil {
		t.Fatal(err)
	}
	checkFor(t, time.Second, 5*time.Millisecond, func() error {
		if _, got := rc.ACLs(); len(got) != 3 {
			return fmt.Errorf("remote cache has %d bindings", len(got))
		}
		return nil
	})
	bad := a
	bad.Principal = "alice"
	if err := c.CreateACLs(ctx, []acl.Binding{bad}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("invalid binding: %v", err)
	}

	name := "orders"
	match := acl.Filter{ResourceType: acl.ResourceTopic, Name: &name, PatternType: acl.PatternMatch, Operation: acl.OpAny, Permission: acl.PermissionAny}
	allow := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.Allow}
	deleted, err := rc.DeleteACLs(ctx, []acl.Filter{allow, match})
	if err != nil {
		t.Fatal(err)
	}
	// allow takes a and b; match would take all three but a and b went
	// to the first filter.
	if len(deleted) != 2 || len(deleted[0]) != 2 || len(deleted[1]) != 1 || deleted[1][0] != d {
		t.Fatalf("deleted: %v", deleted)
	}
	if _, got := c.ACLs(); len(got) != 0 {
		t.Fatalf("left after delete: %v", got)
	}
	if err := c.CreateACLs(ctx, []acl.Binding{a}); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	n.Close()

	n = openSingle(t, dir)
	defer n.Close()
	if _, got := n.Client().ACLs(); len(got) != 1 || got[0] != a {
		t.Fatalf("after restart: %v", got)
	}
}
