package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/internal/tlsconfig"
	"github.com/sluice-broker/sluice/internal/tlsconfig/pkitest"
)

// TestClusterReplicationMutualTLS: 3 meta nodes, 3 write brokers and a
// read broker whose replication and metastore ports are mutual TLS
// (internal.ssl.*, certificates naming broker-<node.id> and
// meta-<meta.id>). Records produced with acks=all
// are consumed from the read broker, which replicates over TLS too. On a
// write broker's replication port a plaintext peer, a TLS peer without a
// certificate, one with a certificate another CA signed and one whose
// certificate names node 9 while its hello declares node 2 are refused,
// counted in sluice_raft_refused_total, and the cluster goes on serving.
func TestClusterReplicationMutualTLS(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	pki := t.TempDir()
	ca, rogue := pkitest.NewCA(t, "internal CA"), pkitest.NewCA(t, "another CA")
	trust := pkitest.Write(t, pki, "ca.crt", ca.PEM())
	c := startTestClusterLayout(t, "raft", 1, clusterLayout{brokerExtra: func(id int) string {
		ks := pkitest.Write(t, pki, fmt.Sprintf("broker-%d.pem", id), ca.Issue(t, fmt.Sprintf("broker %d", id), tlsconfig.NodeName(int64(id))))
		return fmt.Sprintf("internal.ssl.keystore.location: %s\ninternal.ssl.truststore.location: %s\n", ks, trust)
	}, metaExtra: func(metaID int) string {
		ks := pkitest.Write(t, pki, fmt.Sprintf("meta-%d.pem", metaID), ca.Issue(t, fmt.Sprintf("meta %d", metaID), tlsconfig.MetaName(uint64(metaID))))
		return fmt.Sprintf("internal.ssl.keystore.location: %s\ninternal.ssl.truststore.location: %s\n", ks, trust)
	}})
	const topic, parts, n = "mtls", 3, 60
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, topic, parts)
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v%03d", i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, n/2)

	victim := c.writers[0] // node 1
	addr := configValue(t, victim.cfg, "replica.listen")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM())
	keyPair := func(ks []byte) []tls.Certificate {
		cert, err := tls.X509KeyPair(ks, ks)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{cert}
	}
	tlsHello := func(certs []tls.Certificate, node int32) net.Conn {
		t.Helper()
		raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: tlsconfig.NodeName(1), Certificates: certs})
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			t.Fatalf("handshake with node 1: %v", err) // the server's side fails later in TLS 1.3
		}
		hello := []byte("SLRT\x00\x01")
		hello = append(hello, byte(node>>24), byte(node>>16), byte(node>>8), byte(node))
		tc.Write(hello)
		return tc
	}
	refusedConn := func(what string, conn net.Conn) {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Fatalf("%s: the connection was kept", what)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("%s: the connection was neither used nor closed", what)
		}
		conn.Close()
	}
	refusedConn("plaintext hello", raftHello(t, addr, 2, nil))
	refusedConn("no certificate", tlsHello(nil, 2))
	refusedConn("certificate of another CA", tlsHello(keyPair(rogue.Issue(t, "broker 2", tlsconfig.NodeName(2))), 2))
	refusedConn("certificate of node 9", tlsHello(keyPair(ca.Issue(t, "broker 9", tlsconfig.NodeName(9))), 2))

	want := map[string]float64{"tls": 3, "identity": 1}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := labelledMetric(t, victim.admin, "sluice_raft_refused_total", "reason")
		if got["tls"] >= want["tls"] && got["identity"] >= want["identity"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice_raft_refused_total %v, want at least %v", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The metastore port: meta node 1's quorum traffic and the brokers'
	// requests run over mutual TLS; a plaintext peer, one without a
	// certificate and one whose certificate names member 9 but sends
	// raft messages as member 2 are refused.
	meta1 := c.meta[0]
	metaAddr := configValue(t, meta1.cfg, "meta.listen")
	hb := &raftpb.Message{Type: new(raftpb.MsgHeartbeat), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(1) << 30)}
	mb, err := proto.Marshal(hb)
	if err != nil {
		t.Fatal(err)
	}
	batch := binary.BigEndian.AppendUint32(nil, uint32(len(mb)))
	batch = append(batch, mb...)
	raftFrame := binary.BigEndian.AppendUint32(nil, uint32(len(batch)+1))
	raftFrame = append(append(raftFrame, 1), batch...)
	metaTLS := func(certs []tls.Certificate) net.Conn {
		t.Helper()
		raw, err := net.DialTimeout("tcp", metaAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: tlsconfig.MetaName(1), Certificates: certs})
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			t.Fatalf("handshake with meta node 1: %v", err)
		}
		tc.Write(raftFrame)
		return tc
	}
	plain, err := net.DialTimeout("tcp", metaAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	plain.Write(raftFrame)
	refusedConn("metastore: plaintext", plain)
	refusedConn("metastore: no certificate", metaTLS(nil))
	refusedConn("metastore: certificate of member 9", metaTLS(keyPair(ca.Issue(t, "meta 9", tlsconfig.MetaName(9)))))
	deadline = time.Now().Add(10 * time.Second)
	for {
		got := labelledMetric(t, meta1.admin, "sluice_metastore_refused_total", "reason")
		if got["tls"] >= 2 && got["identity"] >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice_metastore_refused_total %v, want tls>=2, identity>=1", got)
		}
		time.Sleep(200 * time.Millisecond)
	}

	produce(n/2, n)
	rc, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	seen := map[string]bool{}
	for len(seen) < n {
		fs := rc.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read broker served %d of %d records: %v", len(seen), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	for i := range n {
		if v := fmt.Sprintf("v%03d", i); !seen[v] {
			t.Fatalf("record %s not served by the read broker", v)
		}
	}
	if _, err := os.Stat(filepath.Join(pki, "broker-4.pem")); err != nil {
		t.Fatalf("the read broker was not given its certificate: %v", err)
	}
}
