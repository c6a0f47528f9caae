package compat

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// The other client stacks over the secure broker (security_test.go): the
// Java client (SCRAM-SHA-512, and OAUTHBEARER through its own token
// endpoint login), Kafka's kafka-configs tool managing SCRAM users, kcat
// (librdkafka) with SCRAM and PLAIN, and confluent-kafka (Python).

func writeProps(t *testing.T, lines ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func (sb *secureBroker) javaProps(t *testing.T, mech string, extra ...string) string {
	return writeProps(t, append([]string{
		"bootstrap.servers=" + sb.KafkaAddr,
		"security.protocol=SASL_SSL",
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + sb.CA,
		"sasl.mechanism=" + mech,
	}, extra...)...)
}

func scramJaas(user, pass string) string {
	return `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="` + user + `" password="` + pass + `";`
}

// tokenEndpoint serves OAuth client-credentials grants: the client id and
// secret in HTTP basic auth buy a JWT for subject sub signed by the test's
// key, as an identity provider would.
func (sb *secureBroker) tokenEndpoint(t *testing.T, clientID, secret, sub string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, pw, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || !ok || id != clientID || pw != secret || r.Form.Get("grant_type") != "client_credentials" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": sb.token(t, sub, nil), "token_type": "Bearer", "expires_in": 3600})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/token"
}

func TestSecureJava(t *testing.T) {
	requireTool(t, "java")
	requireTool(t, "mvn")
	cp := buildJava(t)
	sb := startSecure(t)
	// One JVM for the three client runs: SCRAM-SHA-512, a wrong
	// password, OAUTHBEARER with a token from the client's own
	// client-credentials login against the test's token endpoint.
	url := sb.tokenEndpoint(t, "sluice-java", "java-secret", "svc-java")
	oauthProps := sb.javaProps(t, "OAUTHBEARER",
		"sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
		"sasl.oauthbearer.token.endpoint.url="+url,
		`sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="sluice-java" clientSecret="java-secret" scope="kafka";`)
	// Kafka 4 clients fetch tokens only from allowed URLs (a system
	// property; the JVM reads JAVA_TOOL_OPTIONS).
	t.Setenv("JAVA_TOOL_OPTIONS", "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="+url)
	out, _, err := tool(t, cp, "", "dev.sluice.compat.SecureClient",
		sb.javaProps(t, "SCRAM-SHA-512", scramJaas(secureAdmin, secureAdminPass)), "java-scram", "roundtrip",
		sb.javaProps(t, "SCRAM-SHA-512", scramJaas(secureAdmin, "wrong")), "java-wrong-password", "authfail",
		oauthProps, "java-oauth", "roundtrip")
	for _, line := range []string{"java-scram OK", "java-wrong-password OK", "java-oauth OK"} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("java client: no %q (SCRAM-SHA-512 round trip, wrong password refused with SaslAuthenticationException, OAUTHBEARER round trip)", line)
		}
	}
	if err != nil || !strings.HasSuffix(out, "RESULT OK\n") {
		t.Errorf("java client: %v", err)
	}
	t.Run("kafka-configs manages SCRAM users", func(t *testing.T) {
		cmdCfg := sb.javaProps(t, "SCRAM-SHA-512", scramJaas(secureAdmin, secureAdminPass))
		_, stderr, err := tool(t, cp, "", clsConfigs, "--bootstrap-server", sb.KafkaAddr, "--command-config", cmdCfg,
			"--entity-type", "users", "--entity-name", "carol", "--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=carol-pw],SCRAM-SHA-256=[password=carol-pw]")
		if err != nil {
			t.Fatalf("kafka-configs --alter --add-config: %v", toolErr(err, stderr))
		}
		// The credentials are checked with DescribeUserScramCredentials
		// directly (kafka-configs' own --describe is in TestToolsClientQuotas'
		// territory: it also asks for the users' client quotas).
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		d, err := kadm.NewClient(sb.client(t, scramAuth(secureAdmin, secureAdminPass, true))).DescribeUserSCRAMs(ctx, "carol")
		if err != nil || d["carol"].Err != nil || len(d["carol"].CredInfos) != 2 {
			t.Fatalf("carol's credentials after kafka-configs: %+v, %v", d["carol"], err)
		}
		for _, ci := range d["carol"].CredInfos {
			if want := map[kadm.ScramMechanism]int32{kadm.ScramSha256: 4096, kadm.ScramSha512: 8192}[ci.Mechanism]; ci.Iterations != want {
				t.Errorf("carol's %v: %d iterations, want %d", ci.Mechanism, ci.Iterations, want)
			}
		}
		if err := sb.client(t, scramAuth("carol", "carol-pw", true)).Ping(ctx); err != nil {
			t.Fatalf("carol, created by kafka-configs, cannot log in: %v", err)
		}
		if _, stderr, err := tool(t, cp, "", clsConfigs, "--bootstrap-server", sb.KafkaAddr, "--command-config", cmdCfg,
			"--entity-type", "users", "--entity-name", "carol", "--alter", "--delete-config", "SCRAM-SHA-512"); err != nil {
			t.Fatalf("kafka-configs --delete-config: %v", toolErr(err, stderr))
		}
		ctx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := sb.client(t, scramAuth("carol", "carol-pw", true)).Ping(ctx); err == nil || !strings.Contains(err.Error(), kerr.SaslAuthenticationFailed.Message) {
			t.Fatalf("carol's deleted SCRAM-SHA-512 still logs in: %v", err)
		}
	})
}

func TestSecureKcat(t *testing.T) {
	t.Parallel()
	requireTool(t, "kcat")
	sb := startSecure(t)
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"} {
		t.Run(mech, func(t *testing.T) {
			topic := "kcat-" + strings.ToLower(mech)
			common := []string{"-b", sb.KafkaAddr, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + sb.CA,
				"-X", "sasl.mechanisms=" + mech, "-X", "sasl.username=" + secureAdmin, "-X", "sasl.password=" + secureAdminPass,
				"-X", "topic.request.required.acks=all"}
			kcat(t, 30*time.Second, "one\ntwo\nthree\n", append(common, "-P", "-t", topic)...)
			out, _ := kcat(t, 30*time.Second, "", append(common, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s\n")...)
			if out != "one\ntwo\nthree\n" {
				t.Fatalf("kcat %s read back %q", mech, out)
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "kcat", "-b", sb.KafkaAddr, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location="+sb.CA,
			"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username="+secureAdmin, "-X", "sasl.password=wrong", "-L", "-m", "3")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(strings.ToLower(string(out)), "authentication") {
			t.Fatalf("kcat with a wrong password: %v\n%s", err, tail(string(out), 2000))
		}
	})
}

func TestSecurePythonConfluent(t *testing.T) {
	t.Parallel()
	if !pythonHas("confluent_kafka") {
		harness.SkipMissing(t, "python3 with the confluent_kafka module (make test-setup installs it into compat-tests/.venv)")
	}
	sb := startSecure(t)
	run := func(t *testing.T, topic, mode string, conf ...string) string {
		args := append([]string{topic, mode}, conf...)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "python3", append([]string{"secure.py", "confluent", sb.KafkaAddr}, args...)...)
		cmd.Dir = "python"
		out, err := cmd.CombinedOutput()
		t.Logf("secure.py %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 4000))
		return string(out)
	}
	for _, mech := range []string{"SCRAM-SHA-512", "PLAIN"} {
		t.Run(mech, func(t *testing.T) {
			if out := run(t, "py-"+strings.ToLower(mech), "roundtrip", librdkafkaSASL(sb.CA, mech, secureAdmin, secureAdminPass)...); !strings.HasSuffix(out, "RESULT OK\n") {
				t.Fatal("confluent-kafka round trip over SASL_SSL failed")
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		if out := run(t, "py-none", "authfail", librdkafkaSASL(sb.CA, "SCRAM-SHA-256", secureAdmin, "wrong")...); !strings.HasSuffix(out, "RESULT OK\n") {
			t.Fatal("confluent-kafka with a wrong password was not refused")
		}
	})
}

// librdkafkaSASL is librdkafka's configuration for SASL_SSL with mech.
func librdkafkaSASL(ca, mech, user, pass string) []string {
	return []string{"security.protocol=SASL_SSL", "ssl.ca.location=" + ca, "sasl.mechanism=" + mech,
		"sasl.username=" + user, "sasl.password=" + pass}
}
