package metastore

import (
	"testing"
)

// SCRAM credentials: an alter_scram command upserts and deletes together;
// the local view, a remote client's view (its first image and the watch
// after it) and a restarted node (image from bbolt) all hold the result.
func TestScramCredentials(t *testing.T) {
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
	alice256 := ScramCredential{User: "alice", Mechanism: "SCRAM-SHA-256", Salt: []byte("s1"), StoredKey: []byte("k1"), ServerKey: []byte("v1"), Iterations: 4096}
	alice512 := ScramCredential{User: "alice", Mechanism: "SCRAM-SHA-512", Salt: []byte("s2"), StoredKey: []byte("k2"), ServerKey: []byte("v2"), Iterations: 8192}
	bob := ScramCredential{User: "bob", Mechanism: "SCRAM-SHA-256", Salt: []byte("s3"), StoredKey: []byte("k3"), ServerKey: []byte("v3"), Iterations: 4096}
	if err := c.AlterScramCredentials(ctx, []ScramCredential{alice256, alice512}); err != nil {
		t.Fatal(err)
	}
	rc, err := Dial(ctx, ClientConfig{Addrs: []string{n.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got, ok := rc.ScramCredential("alice", "SCRAM-SHA-512"); !ok || string(got.StoredKey) != "k2" || got.Iterations != 8192 {
		t.Fatalf("remote client's first image: %+v %v", got, ok)
	}
	if err := c.AlterScramCredentials(ctx, []ScramCredential{bob, {User: "alice", Mechanism: "SCRAM-SHA-512", Delete: true}}); err != nil {
		t.Fatal(err)
	}
	if err := rc.WaitRevision(ctx, c.Revision()); err != nil {
		t.Fatal(err)
	}
	check := func(name string, cl *Client) {
		t.Helper()
		users := cl.ScramUsers()
		if len(users) != 2 || len(users["alice"]) != 1 || users["alice"][0].Mechanism != "SCRAM-SHA-256" || len(users["bob"]) != 1 {
			t.Fatalf("%s: users %+v", name, users)
		}
		if users["alice"][0].StoredKey != nil {
			t.Fatalf("%s: ScramUsers leaks keys", name)
		}
		if _, ok := cl.ScramCredential("alice", "SCRAM-SHA-512"); ok {
			t.Fatalf("%s: deleted credential still there", name)
		}
		if got, ok := cl.ScramCredential("bob", "SCRAM-SHA-256"); !ok || string(got.ServerKey) != "v3" {
			t.Fatalf("%s: bob %+v %v", name, got, ok)
		}
	}
	check("local view", c)
	check("remote watch", rc)
	for _, bad := range [][]ScramCredential{{{User: "", Mechanism: "SCRAM-SHA-256"}}, {{User: "x\x00y", Mechanism: "SCRAM-SHA-256"}}} {
		if err := c.AlterScramCredentials(ctx, bad); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2 := openSingle(t, dir)
	defer n2.Close()
	if err := n2.WaitReady(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	check("after restart", n2.Client())
}
