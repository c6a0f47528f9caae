package metastore

import (
	"slices"
	"testing"

	"github.com/sluice-broker/sluice/acl"
)

// Stored super users: add and remove through the embedded client, seen by
// a remote client (first image, then the watch) and by an authorizer over
// it, each change moving the ACL generation; an invalid principal is
// refused; deleting a user's last SCRAM credential removes it; the set
// survives a restart (image from bbolt).
func TestStoredSuperUsers(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, 1, dir)
	cfg.Listen = "127.0.0.1:0"
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c := n.Client()
	if err := c.AddSuperUser(ctx, "User:root"); err != nil {
		t.Fatal(err)
	}
	rc, err := Dial(ctx, ClientConfig{Addrs: []string{n.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got := rc.StoredSuperUsers(); !slices.Equal(got, []string{"User:root"}) {
		t.Fatalf("remote client's first image: %v", got)
	}
	authz := acl.New(acl.Config{}, rc)
	admin := func(p string) bool {
		return authz.Authorize(acl.Request{Principal: p, Host: "127.0.0.1"}, acl.OpAlter, acl.ResourceCluster, acl.ClusterName)
	}
	if !admin("User:root") || admin("User:ops") {
		t.Fatalf("authorizer over the remote client: root %v, ops %v", admin("User:root"), admin("User:ops"))
	}
	gen := rc.ACLGeneration()
	if err := c.AddSuperUser(ctx, "User:ops"); err != nil {
		t.Fatal(err)
	}
	if err := c.AddSuperUser(ctx, "User:ops"); err != nil { // again: no change
		t.Fatal(err)
	}
	if err := rc.WaitRevision(ctx, c.Revision()); err != nil {
		t.Fatal(err)
	}
	if got := rc.StoredSuperUsers(); !slices.Equal(got, []string{"User:ops", "User:root"}) {
		t.Fatalf("remote watch: %v", got)
	}
	if rc.ACLGeneration() == gen || !admin("User:ops") {
		t.Fatalf("a stored super user added: generation %d -> %d, ops allowed %v", gen, rc.ACLGeneration(), admin("User:ops"))
	}
	for _, bad := range []string{"", "root", "User:", ":root"} {
		if err := c.AddSuperUser(ctx, bad); err == nil {
			t.Errorf("principal %q accepted", bad)
		}
	}
	if err := c.RemoveSuperUser(ctx, "User:ops"); err != nil {
		t.Fatal(err)
	}
	if err := rc.WaitRevision(ctx, c.Revision()); err != nil {
		t.Fatal(err)
	}
	if admin("User:ops") || !admin("User:root") {
		t.Fatalf("after removing ops: ops %v, root %v", admin("User:ops"), admin("User:root"))
	}
	// A user whose last SCRAM credential is deleted is no longer one.
	cred := func(mech string, del bool) ScramCredential {
		return ScramCredential{User: "app", Mechanism: mech, Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("v"), Iterations: 4096, Delete: del}
	}
	if err := c.AlterScramCredentials(ctx, []ScramCredential{cred("SCRAM-SHA-256", false), cred("SCRAM-SHA-512", false)}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddSuperUser(ctx, "User:app"); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterScramCredentials(ctx, []ScramCredential{cred("SCRAM-SHA-256", true)}); err != nil {
		t.Fatal(err)
	}
	if got := c.StoredSuperUsers(); !slices.Equal(got, []string{"User:app", "User:root"}) {
		t.Fatalf("app with one credential left: %v", got)
	}
	if err := c.AlterScramCredentials(ctx, []ScramCredential{cred("SCRAM-SHA-512", true)}); err != nil {
		t.Fatal(err)
	}
	if err := rc.WaitRevision(ctx, c.Revision()); err != nil {
		t.Fatal(err)
	}
	if got := rc.StoredSuperUsers(); !slices.Equal(got, []string{"User:root"}) || admin("User:app") {
		t.Fatalf("app without credentials: stored %v, allowed %v", got, admin("User:app"))
	}
	rc.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2 := openSingle(t, dir)
	defer n2.Close()
	if err := n2.WaitReady(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if got := n2.Client().StoredSuperUsers(); !slices.Equal(got, []string{"User:root"}) {
		t.Fatalf("after restart: %v", got)
	}
}
