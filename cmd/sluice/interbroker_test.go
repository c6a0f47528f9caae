package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-broker/sluice/internal/tlsconfig"
	"github.com/sluice-broker/sluice/internal/tlsconfig/pkitest"
)

// TestClusterInterBroker: a split cluster (3 meta nodes, 3 write brokers,
// a read broker) whose Kafka listeners are secured only, with the
// authorizer on and no ACL at all: only super users get anything done,
// the client's principal and the brokers' own. Internal ports are mutual
// TLS with the same certificates, which all carry the subject
// CN=sluice-broker and differ by their names (broker-<id>, the address
// dialled). A producer on the read broker's view has its Produce
// forwarded to the leaders, and the records are read back; a transaction
// over two partitions led by two different write brokers commits, its
// markers sent broker to broker, and a read_committed consumer reads it.
//
// SASL_SSL: the client is the bootstrap user "admin" (SCRAM-SHA-512); the
// brokers authenticate to each other as the SCRAM user "broker"
// (sasl.mechanism.inter.broker.protocol,
// listener.name.kafka.scram-sha-512.sasl.jaas.config), whom the
// administrator creates. SSL: the listeners require client certificates;
// the client's is CN=admin, the brokers present their own, so their
// principal is User:CN=sluice-broker.
func TestClusterInterBroker(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	t.Run("SASL_SSL", func(t *testing.T) { testInterBroker(t, "SASL_SSL") })
	t.Run("SSL", func(t *testing.T) { testInterBroker(t, "SSL") })
}

func testInterBroker(t *testing.T, protocol string) {
	pki := t.TempDir()
	ca := pkitest.NewCA(t, "cluster CA")
	trust := pkitest.Write(t, pki, "ca.crt", ca.PEM())
	common := "internal.ssl.truststore.location: " + trust + "\n"
	listenerKeys := "listener.security.protocol.map: KAFKA:" + protocol + "\n" +
		"ssl.truststore.location: " + trust + "\n" +
		"authorizer.class.name: org.apache.kafka.metadata.authorizer.StandardAuthorizer\n" +
		"inter.broker.listener.name: KAFKA\n"
	if protocol == "SASL_SSL" {
		listenerKeys += "sasl.enabled.mechanisms: SCRAM-SHA-512,SCRAM-SHA-256\n" +
			"super.users: User:admin;User:broker\n" +
			"sasl.mechanism.inter.broker.protocol: SCRAM-SHA-512\n" +
			`listener.name.kafka.scram-sha-512.sasl.jaas.config: 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-pw";'` + "\n"
	} else {
		listenerKeys += "ssl.client.auth: required\n" +
			"super.users: User:CN=admin;User:CN=sluice-broker\n"
	}
	c := startTestClusterLayout(t, "raft", 1, clusterLayout{brokerExtra: func(id int) string {
		// One certificate per broker: its internal name and the address
		// clients (and the other brokers) dial.
		ks := pkitest.Write(t, pki, fmt.Sprintf("broker-%d.pem", id),
			ca.Issue(t, "sluice-broker", tlsconfig.NodeName(int64(id)), "127.0.0.1", "localhost"))
		return common + "internal.ssl.keystore.location: " + ks + "\n" +
			"ssl.keystore.location: " + ks + "\n" + listenerKeys
	}, metaExtra: func(metaID int) string {
		ks := pkitest.Write(t, pki, fmt.Sprintf("meta-%d.pem", metaID), ca.Issue(t, fmt.Sprintf("meta %d", metaID), tlsconfig.MetaName(uint64(metaID))))
		extra := common + "internal.ssl.keystore.location: " + ks + "\n"
		if metaID == 1 && protocol == "SASL_SSL" {
			extra += "bootstrap.user: admin:admin-pw\n"
		}
		return extra
	}})

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM())
	var auth []kgo.Opt
	if protocol == "SASL_SSL" {
		auth = []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
			kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw"}.AsSha512Mechanism())}
	} else {
		ks := ca.Issue(t, "admin")
		cert, err := tls.X509KeyPair(ks, ks)
		if err != nil {
			t.Fatal(err)
		}
		auth = []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}})}
	}
	client := func(seeds []string, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, auth...), opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(client(c.writeAddrs))
	if protocol == "SASL_SSL" {
		// The brokers' SCRAM user, created by the administrator as in
		// Kafka.
		for {
			res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "broker", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "broker-pw"}})
			if err == nil {
				err = res.Error()
			}
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("creating the brokers' user: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	const topic, parts = "interbroker", 3
	if _, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	leaders := waitPreferredLeaders(ctx, t, adm, topic, parts)
	// Two partitions with different leaders.
	pa, pb := int32(-1), int32(-1)
	for p := range int32(parts) {
		for q := p + 1; q < parts; q++ {
			if pa < 0 && leaders[p] != leaders[q] {
				pa, pb = p, q
			}
		}
	}
	if pa < 0 {
		t.Fatalf("every partition has the same leader: %v", leaders)
	}

	// Produce through the read broker: forwarded to the leaders.
	const n = 30
	fwdBefore := metricValue(t, c.readers[0].admin, "sluice_forwarded_produce_total")
	prod := client(c.readAddrs, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProduceRequestTimeout(10*time.Second), kgo.RecordDeliveryTimeout(45*time.Second))
	for i := range n {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("fwd-%03d", i))).FirstErr(); err != nil {
			t.Fatalf("produce %d through the read broker: %v", i, err)
		}
	}
	if fwd := metricValue(t, c.readers[0].admin, "sluice_forwarded_produce_total") - fwdBefore; fwd < n {
		t.Fatalf("the read broker forwarded %v batches, want at least %d", fwd, n)
	}
	markersBefore := 0.0
	for _, w := range c.writers {
		markersBefore += requestCount(t, w.admin, "WriteTxnMarkers")
	}

	// A transaction over pa and pb, committed.
	txp := client(c.writeAddrs, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("interbroker-txn"), kgo.TransactionTimeout(30*time.Second))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		p := pa
		if i%2 == 1 {
			p = pb
		}
		if err := txp.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "txn-%03d", i)}).FirstErr(); err != nil {
			t.Fatalf("transactional produce %d: %v", i, err)
		}
	}
	if err := txp.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	markers := -markersBefore
	for _, w := range c.writers {
		markers += requestCount(t, w.admin, "WriteTxnMarkers")
	}
	if markers < 1 {
		t.Fatalf("no WriteTxnMarkers request reached a write broker: the markers of partitions led by %d and %d did not go broker to broker", leaders[pa], leaders[pb])
	}

	t.Logf("leaders %v; transaction on partitions %d (leader %d) and %d (leader %d); %v WriteTxnMarkers requests",
		leaders, pa, leaders[pa], pb, leaders[pb], markers)

	// read_committed: every forwarded record and the committed transaction.
	cons := client(c.writeAddrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	want := map[string]bool{}
	for i := range n {
		want[fmt.Sprintf("fwd-%03d", i)] = true
	}
	for i := range 10 {
		want[fmt.Sprintf("txn-%03d", i)] = true
	}
	seen := map[string]bool{}
	for len(seen) < len(want) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			var missing []string
			for v := range want {
				if !seen[v] {
					missing = append(missing, v)
				}
			}
			t.Fatalf("read %d of %d records; missing %v", len(seen), len(want), missing)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if !want[string(r.Value)] {
				t.Errorf("unexpected record %q", r.Value)
			}
			seen[string(r.Value)] = true
		})
	}
	if protocol == "SASL_SSL" {
		testInterBrokerACLs(ctx, t, c, adm, pool)
	}
}

// testInterBrokerACLs: users and ACLs created through a write broker hold
// on the write and the read brokers alike. alice may write and read one
// topic and use one group: she produces through the write view and
// consumes in the group through the read view, committing offsets there;
// bob, with no ACL, is refused the topic on both kinds of broker
// (TOPIC_AUTHORIZATION_FAILED) and the group on the read broker
// (GROUP_AUTHORIZATION_FAILED).
func testInterBrokerACLs(ctx context.Context, t *testing.T, c *testCluster, adm *kadm.Client, pool *x509.CertPool) {
	const topic, group = "interbroker-acl", "interbroker-acl-group"
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitPreferredLeaders(ctx, t, adm, topic, 2)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-pw"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("creating users: %v", err)
	}
	acls := kadm.NewACLs().Allow("User:alice").AllowHosts().
		Topics(topic).Groups(group).ResourcePatternType(kadm.ACLPatternLiteral).
		Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe)
	cres, err := adm.CreateACLs(ctx, acls)
	if err != nil {
		t.Fatalf("creating ACLs: %v", err)
	}
	for _, r := range cres {
		if r.Err != nil {
			t.Fatalf("creating ACL %+v: %v", r, r.Err)
		}
	}
	user := func(name, pw string, seeds []string, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...),
			kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
			kgo.SASL(scram.Auth{User: name, Pass: pw}.AsSha512Mechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}

	// alice writes through the write view (the ACLs may take a moment to
	// reach every broker's view of the metastore: retry the first).
	const n = 20
	alice := user("alice", "alice-pw", c.writeAddrs, kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(20*time.Second))
	for i := range n {
		rec := kgo.StringRecord(fmt.Sprintf("acl-%03d", i))
		for {
			err := alice.ProduceSync(ctx, rec).FirstErr()
			if err == nil {
				break
			}
			if i > 0 || ctx.Err() != nil {
				t.Fatalf("alice's produce %d through the write view: %v", i, err)
			}
			time.Sleep(300 * time.Millisecond)
			rec = kgo.StringRecord(fmt.Sprintf("acl-%03d", i))
		}
	}
	// alice reads in her group through the read view and commits there.
	ac := user("alice", "alice-pw", c.readAddrs, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := 0
	for got < n {
		if ctx.Err() != nil {
			t.Fatalf("alice read %d of %d records through the read view", got, n)
		}
		fs := ac.PollFetches(ctx)
		fs.EachError(func(tp string, p int32, err error) { t.Logf("alice's fetch %s/%d: %v", tp, p, err) })
		got += fs.NumRecords()
	}
	if err := ac.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice's commit through the read view: %v", err)
	}
	offs, err := kadm.NewClient(ac).FetchOffsets(ctx, group)
	if err != nil || offs.Error() != nil {
		t.Fatalf("alice's offsets: %v %v", err, offs.Error())
	}
	committed := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != n {
		t.Fatalf("alice's group committed %d offsets in all, want %d", committed, n)
	}

	// bob: refused the topic on a write broker and on the read broker,
	// and the group on the read broker.
	bobW := user("bob", "bob-pw", c.writeAddrs, kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(10*time.Second))
	if err := bobW.ProduceSync(ctx, kgo.StringRecord("bob")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob's produce through the write view: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	bobR := user("bob", "bob-pw", c.readAddrs)
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, bobR)
	if err != nil {
		t.Fatalf("bob's metadata on the read broker: %v", err)
	}
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob's metadata for %s on the read broker: %+v, want TOPIC_AUTHORIZATION_FAILED", topic, mresp.Topics)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = group, []string{group}
	fresp, err := fc.RequestWith(ctx, bobR)
	if err != nil {
		t.Fatalf("bob's FindCoordinator on the read broker: %v", err)
	}
	code := fresp.ErrorCode
	if len(fresp.Coordinators) > 0 {
		code = fresp.Coordinators[0].ErrorCode
	}
	if code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob's FindCoordinator for %s on the read broker: error %v, want GROUP_AUTHORIZATION_FAILED", group, kerr.ErrorForCode(code))
	}
	t.Logf("alice wrote %d records through the write view and read and committed them through the read view; bob was refused on both", n)
}
