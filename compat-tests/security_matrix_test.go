package compat

// The security column of the client matrix (docs/compat.md): every client
// stack produces and reads back records over SASL_SSL with SCRAM-SHA-512
// and over SSL with a client certificate (ssl.client.auth=required), both
// listeners of one `sluice dev` with certificates the test issues. Each
// cell is checked on the broker too: franz-go reads what the client wrote.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	kscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/xdg-go/scram"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// The scenarios of the security column.
const (
	secScram = "security-sasl-ssl-scram-sha-512"
	secMTLS  = "security-ssl-mutual-tls"
)

var securityScenarios = []string{secScram, secMTLS}

const (
	secMatrixUser = "matrix"
	secMatrixPass = "matrix-secret"
	secRecords    = 20
)

// secPKI is the test's CA, the broker's certificate (127.0.0.1,
// localhost) and a client certificate (CN=matrix-client), as files in the
// forms the clients read.
type secPKI struct {
	CA         string // CA certificate (PEM)
	Server     string // broker key and chain (PEM, PKCS#8 key)
	ClientCert string // client certificate (PEM)
	ClientKey  string // client key (PEM, PKCS#8)
	ClientPEM  string // client key and certificate in one file (Kafka's PEM key store)
	pool       *x509.CertPool
	client     tls.Certificate
	// issueClient writes a client certificate for subject, signed by the
	// CA, and returns its certificate and key files.
	issueClient func(subject pkix.Name) (cert, key string)
}

func newSecPKI(t *testing.T) *secPKI {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 100))
		return n
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "compat matrix CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	issue := func(subject pkix.Name, server bool) (certPEM, keyPEM []byte) {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: serial(), Subject: subject,
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if server {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	}
	write := func(name string, parts ...[]byte) string {
		p := filepath.Join(dir, name)
		var b []byte
		for _, part := range parts {
			b = append(b, part...)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	srvCert, srvKey := issue(pkix.Name{CommonName: "sluice"}, true)
	cliCert, cliKey := issue(pkix.Name{CommonName: "matrix-client"}, false)
	p := &secPKI{CA: write("ca.crt", caPEM), Server: write("server.pem", srvKey, srvCert, caPEM),
		ClientCert: write("client.crt", cliCert), ClientKey: write("client.key", cliKey), ClientPEM: write("client.pem", cliKey, cliCert)}
	p.pool = x509.NewCertPool()
	p.pool.AddCert(caCert)
	if p.client, err = tls.X509KeyPair(cliCert, cliKey); err != nil {
		t.Fatal(err)
	}
	issued := 0
	p.issueClient = func(subject pkix.Name) (string, string) {
		issued++
		c, k := issue(subject, false)
		return write(fmt.Sprintf("client-%d.crt", issued), c), write(fmt.Sprintf("client-%d.key", issued), k)
	}
	return p
}

// secMatrixBroker is one `sluice dev` with a SASL_SSL listener (SCRAM-SHA-512,
// its address is KafkaAddr) and an SSL listener that requires a client
// certificate signed by the test's CA.
type secMatrixBroker struct {
	*harness.Broker
	MTLSAddr string
	pki      *secPKI
}

func startSecMatrix(t *testing.T) *secMatrixBroker {
	t.Helper()
	pki := newSecPKI(t)
	mtls := harness.FreeAddr(t)
	b := harness.Start(t, harness.Options{
		Listeners: func(kafka string) string { return "SASL_SSL://" + kafka + ",SSL://" + mtls },
		ExtraArgs: []string{
			"--set", "ssl.keystore.location=" + pki.Server,
			"--set", "sasl.enabled.mechanisms=SCRAM-SHA-512",
			"--set", "listener.name.ssl.ssl.client.auth=required",
			"--set", "listener.name.ssl.ssl.truststore.location=" + pki.CA,
		},
		Env: []string{"SLUICE_BOOTSTRAP_USER=" + secMatrixUser + ":" + secMatrixPass},
	})
	return &secMatrixBroker{Broker: b, MTLSAddr: mtls, pki: pki}
}

// addr is the listener of a scenario.
func (sb *secMatrixBroker) addr(scenario string) string {
	if scenario == secMTLS {
		return sb.MTLSAddr
	}
	return sb.KafkaAddr
}

// goTLS is the tls.Config of the Go clients for a scenario.
func (sb *secMatrixBroker) goTLS(scenario string) *tls.Config {
	c := &tls.Config{RootCAs: sb.pki.pool, ServerName: "127.0.0.1"}
	if scenario == secMTLS {
		c.Certificates = []tls.Certificate{sb.pki.client}
	}
	return c
}

// franz is a franz-go client over SASL_SSL as the matrix user (the broker
// side of every check).
func (sb *secMatrixBroker) franz(t *testing.T, scenario string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(sb.addr(scenario)), kgo.DialTLSConfig(sb.goTLS(scenario))}
	if scenario == secScram {
		base = append(base, kgo.SASL(scramAuth(secMatrixUser, secMatrixPass, true)))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (sb *secMatrixBroker) createTopic(t *testing.T, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(sb.franz(t, secScram)).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// stored reads topic's partition 0 on the broker (franz-go over SASL_SSL)
// and returns the values, at most want of them.
func (sb *secMatrixBroker) stored(t *testing.T, topic string, want int) []string {
	t.Helper()
	cl := sb.franz(t, secScram, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// checkCell records a client's cell: the client's own verdict (err), then
// the broker's copy of what it wrote (values v0..v<n-1>).
func (sb *secMatrixBroker) checkCell(t *testing.T, client, scenario, topic string, n int, err error) {
	t.Helper()
	if err != nil {
		recordMatrix(t, client, scenario, "fail", err.Error())
		return
	}
	got := sb.stored(t, topic, n)
	for i := 0; i < n; i++ {
		if i >= len(got) || got[i] != fmt.Sprint("v", i) {
			recordMatrix(t, client, scenario, "fail", fmt.Sprintf("the broker holds %d records of %d (%.60q...)", len(got), n, got))
			return
		}
	}
	listener := "SASL_SSL listener, SCRAM-SHA-512"
	if scenario == secMTLS {
		listener = "SSL listener, client certificate required"
	}
	recordMatrix(t, client, scenario, "pass", fmt.Sprintf("%d records produced and read back over the %s", n, listener))
}

func secTopic(client, scenario string) string {
	s := "scram"
	if scenario == secMTLS {
		s = "mtls"
	}
	return "secm-" + client + "-" + s
}

// valuesOK checks that got begins with v0..v<n-1>.
func valuesOK(got []string, n int) error {
	for i := 0; i < n; i++ {
		if i >= len(got) || got[i] != fmt.Sprint("v", i) {
			return fmt.Errorf("read back %d of %d records (%.60q)", len(got), n, got)
		}
	}
	return nil
}

// TestSecurityMatrixGo: franz-go, sarama and kafka-go; and the SSL
// listener refuses a client without a certificate.
func TestSecurityMatrixGo(t *testing.T) {
	t.Parallel()
	sb := startSecMatrix(t)
	t.Run("no client certificate", func(t *testing.T) {
		cfg := sb.goTLS(secScram) // the trust store, no certificate
		cl, err := kgo.NewClient(kgo.SeedBrokers(sb.MTLSAddr), kgo.DialTLSConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := cl.Ping(ctx); err == nil || !strings.Contains(err.Error(), "certificate required") {
			t.Fatalf("a client without a certificate on the SSL listener with ssl.client.auth=required: %v", err)
		}
	})
	for _, scen := range securityScenarios {
		t.Run("franz-go/"+scen, func(t *testing.T) {
			topic := secTopic("franz-go", scen)
			sb.createTopic(t, topic)
			sb.checkCell(t, "franz-go", scen, topic, secRecords, franzRoundTrip(t, sb, scen, topic))
		})
		t.Run("sarama/"+scen, func(t *testing.T) {
			topic := secTopic("sarama", scen)
			sb.createTopic(t, topic)
			sb.checkCell(t, "sarama", scen, topic, secRecords, saramaRoundTrip(sb, scen, topic))
		})
		t.Run("kafka-go/"+scen, func(t *testing.T) {
			topic := secTopic("kafka-go", scen)
			sb.createTopic(t, topic)
			sb.checkCell(t, "kafka-go", scen, topic, secRecords, kafkaGoRoundTrip(sb, scen, topic))
		})
	}
}

func franzRoundTrip(t *testing.T, sb *secMatrixBroker, scen, topic string) error {
	cl := sb.franz(t, scen, kgo.DefaultProduceTopic(topic),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range secRecords {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("v", i))).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
	}
	var got []string
	for len(got) < secRecords && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil && ctx.Err() == nil {
			return fmt.Errorf("fetch: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return valuesOK(got, secRecords)
}

// xdgSCRAM is sarama's SCRAM client (sarama leaves it to the application;
// its examples use xdg-go/scram, as here).
type xdgSCRAM struct {
	conv *scram.ClientConversation
}

func (x *xdgSCRAM) Begin(user, pass, authzID string) error {
	c, err := scram.SHA512.NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}
func (x *xdgSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAM) Done() bool                            { return x.conv.Done() }

func saramaRoundTrip(sb *secMatrixBroker, scen, topic string) error {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Net.TLS.Enable = true
	cfg.Net.TLS.Config = sb.goTLS(scen)
	if scen == secScram {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.User, cfg.Net.SASL.Password = secMatrixUser, secMatrixPass
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{} }
	}
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer([]string{sb.addr(scen)}, cfg)
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	for i := range secRecords {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprint("v", i))}); err != nil {
			p.Close()
			return fmt.Errorf("produce: %w", err)
		}
	}
	p.Close()
	c, err := sarama.NewConsumer([]string{sb.addr(scen)}, cfg)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	defer pc.Close()
	var got []string
	timeout := time.After(30 * time.Second)
	for len(got) < secRecords {
		select {
		case m := <-pc.Messages():
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			return fmt.Errorf("consume: %w", err)
		case <-timeout:
			return valuesOK(got, secRecords)
		}
	}
	return valuesOK(got, secRecords)
}

func kafkaGoRoundTrip(sb *secMatrixBroker, scen, topic string) error {
	tr := &kafka.Transport{ClientID: "sluice-security-kafka-go", TLS: sb.goTLS(scen)}
	dialer := &kafka.Dialer{Timeout: 10 * time.Second, TLS: sb.goTLS(scen)}
	if scen == secScram {
		m, err := kscram.Mechanism(kscram.SHA512, secMatrixUser, secMatrixPass)
		if err != nil {
			return err
		}
		tr.SASL, dialer.SASLMechanism = m, m
	}
	w := &kafka.Writer{Addr: kafka.TCP(sb.addr(scen)), Topic: topic, Transport: tr, RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var msgs []kafka.Message
	for i := range secRecords {
		msgs = append(msgs, kafka.Message{Value: []byte(fmt.Sprint("v", i))})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		w.Close()
		return fmt.Errorf("produce: %w", err)
	}
	w.Close()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{sb.addr(scen)}, Topic: topic, Partition: 0, Dialer: dialer, MaxWait: 500 * time.Millisecond})
	defer r.Close()
	var got []string
	for len(got) < secRecords {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return fmt.Errorf("consume: %w (after %d records)", err, len(got))
		}
		got = append(got, string(m.Value))
	}
	return valuesOK(got, secRecords)
}

// TestSecurityMatrixKcat: kcat (librdkafka) produces from stdin and
// consumes to the end.
func TestSecurityMatrixKcat(t *testing.T) {
	t.Parallel()
	requireToolMatrix(t, "kcat", securityScenarios, haveTool("kcat"), "kcat")
	sb := startSecMatrix(t)
	for _, scen := range securityScenarios {
		t.Run(scen, func(t *testing.T) {
			topic := secTopic("kcat", scen)
			sb.createTopic(t, topic)
			common := []string{"-b", sb.addr(scen), "-X", "ssl.ca.location=" + sb.pki.CA, "-X", "topic.request.required.acks=all"}
			if scen == secScram {
				common = append(common, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
					"-X", "sasl.username="+secMatrixUser, "-X", "sasl.password="+secMatrixPass)
			} else {
				common = append(common, "-X", "security.protocol=SSL", "-X", "ssl.certificate.location="+sb.pki.ClientCert,
					"-X", "ssl.key.location="+sb.pki.ClientKey)
			}
			var in strings.Builder
			for i := range secRecords {
				fmt.Fprintf(&in, "v%d\n", i)
			}
			err := runBounded(60*time.Second, in.String(), "kcat", append(common, "-P", "-t", topic)...)
			if err == nil {
				var out string
				out, err = runOutput(60*time.Second, "kcat", append(common, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s\n")...)
				if err == nil {
					err = valuesOK(strings.Fields(out), secRecords)
				}
			}
			sb.checkCell(t, "kcat", scen, topic, secRecords, err)
		})
	}
}

// TestSecurityMatrixJava: the Java client (kafka-clients 4.4.0) through
// SecureClient, one JVM for both listeners; it creates its topics itself.
func TestSecurityMatrixJava(t *testing.T) {
	t.Parallel()
	requireToolMatrix(t, "java-client", securityScenarios, haveTool("java") && haveTool("mvn"), "java and mvn")
	cp := buildJava(t)
	sb := startSecMatrix(t)
	props := map[string]string{
		secScram: writeProps(t, "bootstrap.servers="+sb.KafkaAddr, "security.protocol=SASL_SSL", "ssl.truststore.type=PEM",
			"ssl.truststore.location="+sb.pki.CA, "sasl.mechanism=SCRAM-SHA-512", scramJaas(secMatrixUser, secMatrixPass)),
		secMTLS: writeProps(t, "bootstrap.servers="+sb.MTLSAddr, "security.protocol=SSL", "ssl.truststore.type=PEM",
			"ssl.truststore.location="+sb.pki.CA, "ssl.keystore.type=PEM", "ssl.keystore.location="+sb.pki.ClientPEM),
	}
	var args []string
	for _, scen := range securityScenarios {
		args = append(args, props[scen], secTopic("java", scen), "roundtrip")
	}
	out, stderr, err := tool(t, cp, "", "dev.sluice.compat.SecureClient", args...)
	for _, scen := range securityScenarios {
		topic := secTopic("java", scen)
		var cellErr error
		if !strings.Contains(out, topic+" OK\n") {
			cellErr = fmt.Errorf("SecureClient: %s (exit %v; stderr %s)", lineWith(out, topic+" FAIL"), err, tail(stderr, 300))
		}
		sb.checkCell(t, "java-client", scen, topic, 50, cellErr)
	}
	// Kafka's console producer and consumer with the same properties as
	// --command-config.
	for _, scen := range securityScenarios {
		t.Run("java-tools/"+scen, func(t *testing.T) {
			topic := secTopic("java-tools", scen)
			sb.createTopic(t, topic)
			var in strings.Builder
			for i := range secRecords {
				fmt.Fprintf(&in, "v%d\n", i)
			}
			bs := []string{"--bootstrap-server", sb.addr(scen), "--command-config", props[scen], "--topic", topic}
			_, stderr, err := tool(t, cp, in.String(), clsProducer, append(bs, "--producer-property", "acks=all")...)
			if err == nil && strings.Contains(stderr, "ERROR") {
				err = fmt.Errorf("%s", tail(stderr, 400))
			}
			if err == nil {
				var out string
				out, stderr, err = tool(t, cp, "", clsConsumer, append(bs, "--partition", "0", "--offset", "earliest",
					"--max-messages", fmt.Sprint(secRecords), "--timeout-ms", "30000")...)
				if err == nil {
					err = valuesOK(strings.Fields(out), secRecords)
				}
			}
			if err != nil {
				err = fmt.Errorf("console producer/consumer: %v: %s", err, tail(stderr, 300))
			}
			sb.checkCell(t, toolsClient, scen, topic, secRecords, err)
		})
	}
}

// TestSecurityMatrixPython: confluent-kafka and kafka-python through
// python/secure.py.
func TestSecurityMatrixPython(t *testing.T) {
	t.Parallel()
	sb := startSecMatrix(t)
	for _, c := range pythonClients {
		t.Run(c.client, func(t *testing.T) {
			requireToolMatrix(t, c.client, securityScenarios, pythonHas(c.module),
				"python3 with the "+c.module+" module (make test-setup installs it into compat-tests/.venv)")
			lib := map[string]string{"confluent": "confluent", "kafka-python": "kafka-python"}[c.arg]
			for _, scen := range securityScenarios {
				topic := secTopic(c.arg, scen)
				sb.createTopic(t, topic)
				var conf []string
				switch {
				case lib == "confluent" && scen == secScram:
					conf = librdkafkaSASL(sb.pki.CA, "SCRAM-SHA-512", secMatrixUser, secMatrixPass)
				case lib == "confluent":
					conf = []string{"security.protocol=SSL", "ssl.ca.location=" + sb.pki.CA,
						"ssl.certificate.location=" + sb.pki.ClientCert, "ssl.key.location=" + sb.pki.ClientKey}
				case scen == secScram:
					conf = []string{"security_protocol=SASL_SSL", "ssl_cafile=" + sb.pki.CA, "sasl_mechanism=SCRAM-SHA-512",
						"sasl_plain_username=" + secMatrixUser, "sasl_plain_password=" + secMatrixPass}
				default:
					conf = []string{"security_protocol=SSL", "ssl_cafile=" + sb.pki.CA,
						"ssl_certfile=" + sb.pki.ClientCert, "ssl_keyfile=" + sb.pki.ClientKey}
				}
				out, err := runOutputDir(90*time.Second, "python", "python3", append([]string{"secure.py", lib, sb.addr(scen), topic, "roundtrip"}, conf...)...)
				var cellErr error
				if !strings.HasSuffix(out, "RESULT OK\n") {
					cellErr = fmt.Errorf("secure.py: %s (%v)", lineWith(out, "RESULT"), err)
					t.Logf("secure.py %s %s:\n%s", lib, scen, tail(out, 3000))
				}
				sb.checkCell(t, c.client, scen, topic, secRecords, cellErr)
			}
		})
	}
}

// TestSecurityMatrixKafkaJS: kafkajs through js/secure.js.
func TestSecurityMatrixKafkaJS(t *testing.T) {
	t.Parallel()
	_, err := os.Stat("js/node_modules/kafkajs")
	requireToolMatrix(t, "kafkajs", securityScenarios, haveTool("node") && err == nil, "node with kafkajs (npm ci in compat-tests/js)")
	sb := startSecMatrix(t)
	for _, scen := range securityScenarios {
		t.Run(scen, func(t *testing.T) {
			topic := secTopic("kafkajs", scen)
			sb.createTopic(t, topic)
			args := []string{"secure.js", sb.addr(scen), topic, sb.pki.CA, "scram", secMatrixUser, secMatrixPass}
			if scen == secMTLS {
				args = []string{"secure.js", sb.addr(scen), topic, sb.pki.CA, "mtls", sb.pki.ClientCert, sb.pki.ClientKey}
			}
			out, err := runOutputDir(90*time.Second, "js", "node", args...)
			var cellErr error
			if !strings.HasSuffix(out, "RESULT OK\n") {
				cellErr = fmt.Errorf("secure.js: %s (%v)", lineWith(out, "RESULT"), err)
				t.Logf("secure.js %s:\n%s", scen, tail(out, 3000))
			}
			sb.checkCell(t, "kafkajs", scen, topic, secRecords, cellErr)
		})
	}
}

func haveTool(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

// runBounded runs name with stdin, bounded by timeout.
func runBounded(timeout time.Duration, stdin, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", name, err, tail(string(out), 500))
	}
	return nil
}

// runOutput runs name bounded by timeout and returns its stdout.
func runOutput(timeout time.Duration, name string, args ...string) (string, error) {
	return runOutputDir(timeout, "", name, args...)
}

func runOutputDir(timeout time.Duration, dir, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: %v: %s", name, err, tail(errb.String(), 500))
	}
	return string(out), nil
}

// lineWith is the first line of out containing s, or the tail of out.
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return tail(out, 300)
}

// TestSecurityMatrixConfluentKafkaGo: confluent-kafka-go (its bundled
// librdkafka) through ckg's secure group.
func TestSecurityMatrixConfluentKafkaGo(t *testing.T) {
	t.Parallel()
	bin, why := buildCkg(t)
	requireToolMatrix(t, ckgClient, securityScenarios, bin != "", "a cgo build of confluent-kafka-go ("+why+")")
	sb := startSecMatrix(t)
	for _, scen := range securityScenarios {
		t.Run(scen, func(t *testing.T) {
			topic := secTopic("ckg", scen)
			sb.createTopic(t, topic)
			conf := librdkafkaSASL(sb.pki.CA, "SCRAM-SHA-512", secMatrixUser, secMatrixPass)
			if scen == secMTLS {
				conf = []string{"security.protocol=SSL", "ssl.ca.location=" + sb.pki.CA,
					"ssl.certificate.location=" + sb.pki.ClientCert, "ssl.key.location=" + sb.pki.ClientKey}
			}
			out, err := runOutput(90*time.Second, bin, append([]string{"secure", sb.addr(scen), topic}, conf...)...)
			var cellErr error
			if !strings.Contains(out, "RESULT roundtrip pass") {
				cellErr = fmt.Errorf("ckg secure: %s (%v)", lineWith(out, "RESULT"), err)
			}
			sb.checkCell(t, ckgClient, scen, topic, secRecords, cellErr)
		})
	}
}
