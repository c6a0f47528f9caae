package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-broker/sluice/internal/tlsconfig/pkitest"
)

// TestToolsCommandConfig: the topic, group and cluster commands against
// `sluice dev --secure` with Kafka's client properties (--command-config):
// SASL_SSL with SCRAM-SHA-512 through sasl.jaas.config, SCRAM-SHA-256
// through librdkafka's sasl.username/sasl.password, and an SSL listener
// that requires a client certificate (ssl.keystore.location); a wrong
// password and a missing client certificate are refused.
func TestToolsCommandConfig(t *testing.T) {
	ports := freePorts(t, 3)
	sasl, mtls, admin := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprintf("127.0.0.1:%d", ports[2])
	d := newSecureDev(t, admin)
	dir := d.dir
	clients := pkitest.NewCA(t, "tool clients CA")
	clientsCA := pkitest.Write(t, dir, "clients-ca.crt", clients.PEM())
	toolPEM := pkitest.Write(t, dir, "tool.pem", clients.Issue(t, "tool-client"))
	d.start(t, append(os.Environ(), "SLUICE_BOOTSTRAP_USER=admin:admin-pw"),
		"--listeners", "SASL_SSL://"+sasl+",MTLS://"+mtls,
		"--set", "listener.security.protocol.map=SASL_SSL:SASL_SSL,MTLS:SSL",
		"--set", "listener.name.mtls.ssl.client.auth=required",
		"--set", "listener.name.mtls.ssl.truststore.location="+clientsCA,
		// The certificate's principal, as Kafka's default builder names it.
		"--set", "super.users=User:CN=tool-client")
	waitReady(t, admin, 60*time.Second)
	ca := d.caFile()

	// A topic and a group with a commit, made with franz-go directly.
	pool := d.caPool(t)
	const topic, group = "secured-orders", "secured-billing"
	cl, err := kgo.NewClient(kgo.SeedBrokers(sasl), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw"}.AsSha512Mechanism()),
		kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 3 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("v", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for got < 2 && ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 2-got)
		got += len(fs.Records())
		if err := cl.CommitRecords(ctx, fs.Records()...); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()

	props := func(name string, lines ...string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	scram512 := props("scram512.properties", "bootstrap.servers="+sasl, "security.protocol=SASL_SSL",
		"ssl.truststore.type=PEM", "ssl.truststore.location="+ca, "sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-pw";`)
	scram256 := props("scram256.properties", "security.protocol=SASL_SSL", "ssl.truststore.location="+ca,
		"sasl.mechanism=SCRAM-SHA-256", "sasl.username=admin", "sasl.password=admin-pw")
	mutual := props("mtls.properties", "bootstrap.servers="+mtls, "security.protocol=SSL", "ssl.truststore.location="+ca,
		"ssl.keystore.type=PEM", "ssl.keystore.location="+toolPEM)

	// bootstrap.servers of the file, no --bootstrap-server.
	if out := sluiceCmd(t, "topic", "list", "--command-config", scram512); !strings.Contains(out, topic+"\n") {
		t.Fatalf("topic list over SCRAM-SHA-512: %q", out)
	}
	// --bootstrap-server and a file without bootstrap.servers.
	if out := sluiceCmd(t, "topic", "describe", topic, "--bootstrap-server", sasl, "--command-config", scram256); !strings.Contains(out, "Topic: "+topic+"\tPartition: 0\tLeader: 1") {
		t.Fatalf("topic describe over SCRAM-SHA-256: %q", out)
	}
	if out := sluiceCmd(t, "group", "describe", group, "--command-config", scram512); !strings.Contains(out, group) || !strings.Contains(out, topic) {
		t.Fatalf("group describe over SCRAM-SHA-512: %q", out)
	}
	var total, committed int
	out := sluiceCmd(t, "group", "describe", group, "--json", "--command-config", mutual)
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `"current_offset"`) {
			var v int
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), `"current_offset":`)), "%d", &v)
			committed += v
			total++
		}
	}
	if total == 0 || committed != 2 {
		t.Fatalf("group describe over mutual TLS: %d partitions, %d committed (want 2):\n%s", total, committed, out)
	}
	if out := sluiceCmd(t, "cluster", "status", "--command-config", mutual); !strings.Contains(out, "broker 1 127.0.0.1:") {
		t.Fatalf("cluster status over mutual TLS: %q", out)
	}

	refused := func(args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, binPath, args...).CombinedOutput()
		if err == nil {
			t.Fatalf("sluice %s succeeded:\n%s", strings.Join(args, " "), out)
		}
		t.Logf("sluice %s: %v: %s", strings.Join(args, " "), err, out)
		return string(out)
	}
	wrong := props("wrong.properties", "bootstrap.servers="+sasl, "security.protocol=SASL_SSL", "ssl.truststore.location="+ca,
		"sasl.mechanism=SCRAM-SHA-512", "sasl.username=admin", "sasl.password=wrong")
	if out := refused("topic", "list", "--command-config", wrong); !strings.Contains(out, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("a wrong password: %s", out)
	}
	noCert := props("nocert.properties", "bootstrap.servers="+mtls, "security.protocol=SSL", "ssl.truststore.location="+ca)
	if out := refused("topic", "list", "--command-config", noCert); !strings.Contains(out, "certificate") {
		t.Fatalf("no client certificate: %s", out)
	}
	if out := refused("topic", "list", "--command-config", props("gssapi.properties", "security.protocol=SASL_SSL")); !strings.Contains(out, "GSSAPI") {
		t.Fatalf("Kafka's default mechanism GSSAPI: %s", out)
	}
}
