package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestBootstrapUserPersists: the bootstrap user of `sluice dev --secure`
// stays the super user after a restart without SLUICE_BOOTSTRAP_USER (the
// metastore stores it, not the process's super.users): it can still
// create ACLs and users, while a user it created, without ACLs, cannot.
func TestBootstrapUserPersists(t *testing.T) {
	ports := freePorts(t, 2)
	kafka, admin := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			env = append(env, kv)
		}
	}
	d := newSecureDev(t, admin)
	p := d.p
	start := func(extraEnv ...string) {
		t.Helper()
		d.start(t, append(append([]string{}, env...), extraEnv...), "--kafka-addr", kafka)
		waitReady(t, admin, 60*time.Second)
	}
	start("SLUICE_BOOTSTRAP_USER=root:root-pw")

	pool := d.caPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := func(user, pass string) *kadm.Client {
		return scramAdmin(t, kafka, user, pass, kgo.DialTLSConfig(&tls.Config{RootCAs: pool}))
	}
	createACL := func(a *kadm.Client, group string) error { return createGroupACL(ctx, a, group) }
	if err := createACL(adm("root", "root-pw"), "before-restart"); err != nil {
		t.Fatalf("the bootstrap user's CreateAcls: %v", err)
	}

	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	start() // no SLUICE_BOOTSTRAP_USER

	root := adm("root", "root-pw")
	if err := createACL(root, "after-restart"); err != nil {
		t.Fatalf("the bootstrap user's CreateAcls after a restart without SLUICE_BOOTSTRAP_USER: %v", err)
	}
	up, err := root.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "app", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "app-pw"}})
	if err != nil || up["app"].Err != nil {
		t.Fatalf("the bootstrap user's AlterUserScramCredentials after the restart: %v %v", err, up)
	}
	if err := createACL(adm("app", "app-pw"), "by-app"); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("CreateAcls by a user without ACLs: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}

// TestClusterBootstrapUser is docs/security.md's cluster recipe: the
// bootstrap user is given to one meta node only, and it is a super user
// on every write and read broker, none of which had it; a user without
// ACLs is refused there.
func TestClusterBootstrapUser(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterLayout(t, "raft", 1, clusterLayout{
		extra: "listener.security.protocol.map: KAFKA:SASL_PLAINTEXT\nsasl.enabled.mechanisms: SCRAM-SHA-512\n" +
			"authorizer.class.name: org.apache.kafka.metadata.authorizer.StandardAuthorizer\n",
		metaExtra: func(id int) string {
			if id == 1 {
				return "bootstrap.user: root:root-pw\n"
			}
			return ""
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := func(addr, user, pass string) *kadm.Client { return scramAdmin(t, addr, user, pass) }
	createACL := func(a *kadm.Client, group string) error { return createGroupACL(ctx, a, group) }
	up, err := adm(c.writeAddrs[0], "root", "root-pw").AlterUserSCRAMs(ctx, nil,
		[]kadm.UpsertSCRAM{{User: "app", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "app-pw"}})
	if err != nil || up["app"].Err != nil {
		t.Fatalf("the bootstrap user's AlterUserScramCredentials on a write broker: %v %v", err, up)
	}
	for i, addr := range append(append([]string{}, c.writeAddrs...), c.readAddrs...) {
		if err := createACL(adm(addr, "root", "root-pw"), fmt.Sprint("g", i)); err != nil {
			t.Errorf("the bootstrap user's CreateAcls at %s: %v", addr, err)
		}
		if err := createACL(adm(addr, "app", "app-pw"), fmt.Sprint("app", i)); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Errorf("CreateAcls by a user without ACLs at %s: %v, want CLUSTER_AUTHORIZATION_FAILED", addr, err)
		}
	}
}

// scramAdmin is an admin client of addr authenticated as user with
// SCRAM-SHA-512 (opts: TLS, say), closed when the test ends.
func scramAdmin(t *testing.T, addr, user, pass string, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createGroupACL allows User:app to read group, answering the ACL's own error.
func createGroupACL(ctx context.Context, a *kadm.Client, group string) error {
	res, err := a.CreateACLs(ctx, kadm.NewACLs().Groups(group).Allow("User:app").Operations(kadm.OpRead))
	if err != nil {
		return err
	}
	return res[0].Err
}
