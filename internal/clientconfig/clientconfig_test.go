package clientconfig

import (
	"crypto/tls"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-broker/sluice/internal/tlsconfig"
	"github.com/sluice-broker/sluice/internal/tlsconfig/pkitest"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, props string
		want        Config // compared on the fields below
		err         string
		ignored     []string
	}{
		{name: "empty is plaintext", props: "", want: Config{Protocol: Plaintext, VerifyHostname: true}},
		{name: "kafka tool file, SCRAM-SHA-512", props: `
bootstrap.servers=h1:9093, h2:9093
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
  username="admin" password="p\\"w=;x";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/ca.crt
request.timeout.ms=30000
`, want: Config{BootstrapServers: []string{"h1:9093", "h2:9093"}, Protocol: SASLSSL, Mechanism: "SCRAM-SHA-512",
			Username: "admin", Password: `p"w=;x`, VerifyHostname: true,
			TLS: tlsconfig.Options{TruststoreType: "PEM", TruststoreLocation: "/etc/ca.crt"}},
			ignored: []string{"request.timeout.ms"}},
		{name: "PLAIN module, bare values", props: "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n" +
			"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=bob password=secret;",
			want: Config{Protocol: SASLPlaintext, Mechanism: "PLAIN", Username: "bob", Password: "secret", VerifyHostname: true}},
		{name: "librdkafka names", props: "security.protocol=sasl_ssl\nsasl.mechanism=scram-sha-256\nsasl.username=u\nsasl.password=p\n",
			want: Config{Protocol: SASLSSL, Mechanism: "SCRAM-SHA-256", Username: "u", Password: "p", VerifyHostname: true}},
		{name: "mutual TLS, no hostname check", props: "security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location=/k.pem\n" +
			"ssl.keystore.password=kp\nssl.endpoint.identification.algorithm=\n",
			want: Config{Protocol: SSL, TLS: tlsconfig.Options{KeystoreType: "PEM", KeystoreLocation: "/k.pem", KeyPassword: "kp"}}},
		{name: "every shared ssl key", props: "security.protocol=SSL\nssl.keystore.type=pem\nssl.keystore.location=/k.pem\n" +
			"ssl.keystore.password=ignored\nssl.key.password=kp\nssl.truststore.type=PEM\nssl.truststore.certificates=CAS\n" +
			"ssl.enabled.protocols=TLSv1.3\nssl.cipher.suites= TLS_A, TLS_B\n",
			want: Config{Protocol: SSL, VerifyHostname: true, TLS: tlsconfig.Options{KeystoreType: "pem", KeystoreLocation: "/k.pem",
				KeyPassword: "kp", TruststoreType: "PEM", TruststoreCertificates: "CAS", EnabledProtocols: []string{"TLSv1.3"},
				CipherSuites: []string{"TLS_A", "TLS_B"}}}},
		{name: "ssl and sasl keys on plaintext are ignored, as in Kafka", props: "ssl.truststore.location=/ca\nsasl.mechanism=PLAIN\n",
			want: Config{Protocol: Plaintext, VerifyHostname: true}, ignored: []string{"sasl.mechanism", "ssl.truststore.location"}},
		{name: "GSSAPI by default", props: "security.protocol=SASL_SSL\nsasl.username=u\n", err: "sasl.mechanism GSSAPI"},
		{name: "OAUTHBEARER", props: "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n", err: "sasl.mechanism OAUTHBEARER"},
		{name: "no user", props: "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", err: "needs a user"},
		{name: "both user forms", props: "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=u\n" +
			"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=u password=p;", err: "not both"},
		{name: "other login module", props: "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n" +
			"sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required;", err: "login module"},
		{name: "jaas without semicolon", props: "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n" +
			"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=u password=p", err: "sasl.jaas.config"},
		{name: "jaas unterminated quote", props: "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n" +
			`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u;`, err: "unterminated"},
		{name: "jaas bad flag", props: "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n" +
			`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule always username=u;`, err: "control flag"},
		{name: "unknown protocol", props: "security.protocol=TLS\n", err: "security.protocol"},
		{name: "unknown ssl key", props: "security.protocol=SSL\nssl.keystore.flavour=x\n", err: "ssl.keystore.flavour"},
		{name: "bad identification algorithm", props: "ssl.endpoint.identification.algorithm=ldap\n", err: "identification"},
		{name: "ssl.client.auth is a broker's key", props: "security.protocol=SSL\nssl.client.auth=required\n", err: "ssl.client.auth"},
		{name: "truststore password", props: "security.protocol=SSL\nssl.truststore.password=x\n", err: "no password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.props)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(c.BootstrapServers, ",") != strings.Join(tc.want.BootstrapServers, ",") || c.Protocol != tc.want.Protocol ||
				c.Mechanism != tc.want.Mechanism || c.Username != tc.want.Username || c.Password != tc.want.Password ||
				c.VerifyHostname != tc.want.VerifyHostname || !reflect.DeepEqual(c.TLS, tc.want.TLS) {
				t.Fatalf("got %+v\nwant %+v", c, tc.want)
			}
			if strings.Join(c.Ignored, ",") != strings.Join(tc.ignored, ",") {
				t.Fatalf("ignored %v, want %v", c.Ignored, tc.ignored)
			}
			if _, err := c.Opts(); err != nil && c.TLS.KeystoreLocation == "" && c.TLS.TruststoreLocation == "" {
				t.Fatalf("Opts: %v", err)
			}
		})
	}
}

// TestClientTLS: the tls.Config a properties file gives, against a TLS
// server that requires a client certificate: the trust store verifies the
// server, the key store is the client certificate, and the host name is
// checked unless ssl.endpoint.identification.algorithm is empty.
func TestClientTLS(t *testing.T) {
	dir := t.TempDir()
	ca := pkitest.NewCA(t, "test CA")
	caFile := pkitest.Write(t, dir, "ca.crt", ca.PEM())
	server := pkitest.Write(t, dir, "server.pem", ca.Issue(t, "broker", "broker.example"))
	client := pkitest.Write(t, dir, "client.pem", ca.Issue(t, "tool"))
	other := pkitest.NewCA(t, "other CA")
	otherFile := pkitest.Write(t, dir, "other.crt", other.PEM())
	stranger := pkitest.Write(t, dir, "stranger.pem", other.Issue(t, "stranger"))

	l, err := tlsconfig.NewLoader(tlsconfig.Options{KeystoreLocation: server, TruststoreLocation: caFile, ClientAuth: "required"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", l.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peers := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				if tc.Handshake() != nil {
					return
				}
				peers <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
				io.WriteString(c, "ok")
			}()
		}
	}()
	dial := func(props, serverName string) (string, error) {
		c, err := Parse(props)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := c.TLS.Client(c.VerifyHostname)
		if err != nil {
			return "", err
		}
		cfg.ServerName = serverName
		conn, err := tls.DialWithDialer(&net.Dialer{}, "tcp", ln.Addr().String(), cfg)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		b, err := io.ReadAll(conn)
		if err != nil || string(b) != "ok" {
			return "", io.ErrUnexpectedEOF
		}
		return <-peers, nil
	}
	base := "security.protocol=SSL\nssl.truststore.location=" + caFile + "\n"
	if cn, err := dial(base+"ssl.keystore.location="+client+"\n", "broker.example"); err != nil || cn != "tool" {
		t.Fatalf("mutual TLS: peer %q, %v", cn, err)
	}
	if _, err := dial(base+"ssl.keystore.location="+client+"\n", "elsewhere.example"); err == nil || !strings.Contains(err.Error(), "elsewhere.example") {
		t.Fatalf("a certificate for another name was accepted: %v", err)
	}
	if cn, err := dial(base+"ssl.keystore.location="+client+"\nssl.endpoint.identification.algorithm=\n", "elsewhere.example"); err != nil || cn != "tool" {
		t.Fatalf("without the name check: peer %q, %v", cn, err)
	}
	if _, err := dial("security.protocol=SSL\nssl.truststore.location="+otherFile+"\nssl.keystore.location="+client+
		"\nssl.endpoint.identification.algorithm=\n", "broker.example"); err == nil {
		t.Fatal("a broker the trust store does not sign was accepted without the name check")
	}
	if _, err := dial(base, "broker.example"); err == nil {
		t.Fatal("no client certificate, yet the server accepted")
	}
	if _, err := dial(base+"ssl.keystore.location="+stranger+"\n", "broker.example"); err == nil {
		t.Fatal("a client certificate of another CA was accepted")
	}
}
