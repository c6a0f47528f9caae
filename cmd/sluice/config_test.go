package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-broker/sluice/configs"
)

// A server.properties file as Kafka writes one is a config file too.
func TestLoadConfigServerProperties(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "server.properties")
	props := `# written as for Kafka
node.id=7
process.roles=write,read
log.dirs=` + filepath.Join(dir, "data") + `
listeners=CLIENT://127.0.0.1:19092,READER://0.0.0.0:19192
advertised.listeners=READER://reader.example.com:19192
listener.security.protocol.map=CLIENT:PLAINTEXT,READER:PLAINTEXT
listener.views=CLIENT:write,READER:read
meta.addrs=127.0.0.1:19391,127.0.0.1:19392
num.partitions=3
`
	if err := os.WriteFile(file, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(file, overrides{})
	if err != nil {
		t.Fatal(err)
	}
	want := []configs.Listener{
		{Name: "CLIENT", View: "write", Address: "127.0.0.1:19092", Protocol: "PLAINTEXT"},
		{Name: "READER", View: "read", Address: "0.0.0.0:19192", Advertised: "reader.example.com:19192", Protocol: "PLAINTEXT"},
	}
	if len(cfg.Listeners) != 2 || cfg.Listeners[0] != want[0] || cfg.Listeners[1] != want[1] {
		t.Errorf("listeners %+v, want %+v", cfg.Listeners, want)
	}
	if cfg.NodeID != 7 || cfg.NumPartitions != 3 || cfg.DataDir != filepath.Join(dir, "data") ||
		strings.Join(cfg.Roles, ",") != "write,read" || len(cfg.MetaAddrs) != 2 {
		t.Errorf("loaded %+v", cfg)
	}
}

// Listeners from the environment and from flags, in Kafka's form; the
// flags win.
func TestLoadConfigListenersFromEnvAndFlags(t *testing.T) {
	t.Setenv("SLUICE_LISTENERS", "PLAINTEXT://127.0.0.1:29092")
	t.Setenv("SLUICE_LOG_DIRS", t.TempDir())
	cfg, err := loadConfig("", overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Listeners) != 1 || cfg.Listeners[0].Address != "127.0.0.1:29092" || cfg.Listeners[0].View != "mixed" {
		t.Errorf("listeners from SLUICE_LISTENERS: %+v", cfg.Listeners)
	}
	cfg, err = loadConfig("", overrides{listeners: "PLAINTEXT://0.0.0.0:39092", advertised: "PLAINTEXT://broker.example.com:39092"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Listeners) != 1 || cfg.Listeners[0].Address != "0.0.0.0:39092" || cfg.Listeners[0].Advertised != "broker.example.com:39092" {
		t.Errorf("listeners from flags: %+v", cfg.Listeners)
	}
	// Binding every interface without an advertised address is refused
	// with a message that names the fix.
	_, err = loadConfig("", overrides{listeners: "PLAINTEXT://0.0.0.0:39092"})
	if err == nil || !strings.Contains(err.Error(), "advertised.listeners") {
		t.Errorf("0.0.0.0 without advertised.listeners: %v", err)
	}
}

// log.retention.ms over log.retention.minutes over log.retention.hours,
// from a properties file, the environment or --set, as Kafka ranks them.
func TestLoadConfigRetentionPrecedence(t *testing.T) {
	const hour, minute = int64(3600000), int64(60000)
	for _, tc := range []struct {
		name  string
		props string
		env   map[string]string
		set   []string
		want  int64
	}{
		{name: "default: 168 hours", want: 168 * hour},
		{name: "hours", props: "log.retention.hours=2\n", want: 2 * hour},
		{name: "minutes over hours", props: "log.retention.hours=2\nlog.retention.minutes=5\n", want: 5 * minute},
		{name: "ms over minutes", props: "log.retention.minutes=5\nlog.retention.ms=1234\n", want: 1234},
		{name: "ms 0 is set", props: "log.retention.hours=2\nlog.retention.ms=0\n", want: 0},
		{name: "negative is no limit", props: "log.retention.minutes=-5\n", want: -1},
		{name: "environment", env: map[string]string{"SLUICE_LOG_RETENTION_MINUTES": "7"}, want: 7 * minute},
		{name: "--set over the file", props: "log.retention.minutes=5\n", set: []string{"log.retention.ms=99"}, want: 99},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "server.properties")
			if err := os.WriteFile(file, []byte("log.dirs="+filepath.Join(dir, "data")+"\n"+tc.props), 0o644); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, err := loadConfig(file, overrides{set: tc.set})
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.RetentionMs(); got != tc.want {
				t.Errorf("retention %d ms, want %d", got, tc.want)
			}
			if got := cfg.TopicDefaults()["retention.ms"]; got != strconv.FormatInt(tc.want, 10) {
				t.Errorf("topic default retention.ms %s, want %d", got, tc.want)
			}
		})
	}
}

// Kafka's security keys in server.properties: a SASL_SSL listener with
// broker-wide ssl.* keys and listener.name.<name>.* overrides on top.
func TestLoadConfigListenerSecurity(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "server.properties")
	props := `log.dirs=` + filepath.Join(dir, "data") + `
listeners=PLAIN://127.0.0.1:19092,SECURE://127.0.0.1:19093
listener.security.protocol.map=PLAIN:PLAINTEXT,SECURE:SASL_SSL
ssl.keystore.location=/etc/sluice/broker.pem
ssl.client.auth=none
listener.name.secure.ssl.client.auth=requested
listener.name.secure.ssl.truststore.location=/etc/sluice/ca.crt
listener.name.secure.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
listener.name.secure.oauthbearer.sasl.oauthbearer.expected.issuer=https://issuer.example.com
listener.name.secure.ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,\
    DEFAULT
connections.max.reauth.ms=60000
`
	if err := os.WriteFile(file, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(file, overrides{})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := cfg.ListenerSecurity(cfg.Listeners[1])
	if err != nil {
		t.Fatal(err)
	}
	if sec.Protocol != "SASL_SSL" || sec.TLS.ClientAuth != "requested" || sec.TLS.KeystoreLocation != "/etc/sluice/broker.pem" ||
		sec.TLS.TruststoreLocation != "/etc/sluice/ca.crt" || strings.Join(sec.Mechanisms, ",") != "SCRAM-SHA-512,PLAIN" ||
		sec.OAuth.ExpectedIssuer != "https://issuer.example.com" || sec.MaxReauth.Milliseconds() != 60000 {
		t.Errorf("SECURE listener: %+v", sec)
	}
	if name, err := sec.PrincipalMapper.Name("CN=Duke,OU=ServiceUsers,O=Org,C=US"); err != nil || name != "duke" {
		t.Errorf("SECURE listener's ssl.principal.mapping.rules %s: %q, %v", sec.PrincipalMapper, name, err)
	}
	plain, err := cfg.ListenerSecurity(cfg.Listeners[0])
	if err != nil || plain.Protocol != "PLAINTEXT" || plain.TLS.ClientAuth != "none" {
		t.Errorf("PLAIN listener: %+v, %v", plain, err)
	}
	for _, bad := range []string{
		"listener.name.secure.ssl.keystore.colour=red",
		"listener.name.other.ssl.client.auth=required",
		"listener.name.secure.sasl.enabled.mechanisms=GSSAPI",
		"ssl.principal.mapping.rules=DEFAULT/L",
		"listener.name.plain.ssl.principal.mapping.rules=RULE:^CN=(a)\\\\1$/$1/",
	} {
		if err := os.WriteFile(file, []byte(props+bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := loadConfig(file, overrides{}); err == nil {
			t.Errorf("%s: loaded without error", bad)
		}
	}
}

// TestLoadConfigInterBroker: Kafka's inter-broker keys in
// server.properties form, the JAAS value as Kafka writes it.
func TestLoadConfigInterBroker(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "server.properties")
	props := `log.dirs=` + filepath.Join(dir, "data") + `
listeners=CLIENT://127.0.0.1:19093
listener.security.protocol.map=CLIENT:SASL_SSL
ssl.keystore.location=/etc/sluice/broker.pem
inter.broker.listener.name=CLIENT
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256
listener.name.client.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="broker" \
    password="broker-secret";
`
	if err := os.WriteFile(file, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(file, overrides{})
	if err != nil {
		t.Fatal(err)
	}
	ib, err := cfg.InterBroker(cfg.InterBrokerListener(), cfg.Listeners[0].Protocol)
	if err != nil {
		t.Fatal(err)
	}
	if ib.Listener != "CLIENT" || ib.Protocol != "SASL_SSL" || ib.Mechanism != "SCRAM-SHA-256" || ib.Username != "broker" ||
		ib.Password != "broker-secret" || ib.TLS.KeystoreLocation != "/etc/sluice/broker.pem" {
		t.Errorf("inter-broker: %+v", ib)
	}
	for _, bad := range []string{
		"security.inter.broker.protocol=SASL_SSL",                  // with inter.broker.listener.name
		"listener.name.client.gssapi.sasl.jaas.config=x required;", // not a mechanism Sluice speaks
	} {
		if err := os.WriteFile(file, []byte(props+bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := loadConfig(file, overrides{}); err == nil {
			t.Errorf("%s: loaded without error", bad)
		}
	}
	if err := os.WriteFile(file, []byte(strings.Replace(props, "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256\n", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(file, overrides{}); err == nil || !strings.Contains(err.Error(), "sasl.mechanism.inter.broker.protocol") {
		t.Errorf("a SASL inter-broker listener without a mechanism: %v", err)
	}
}

// sluice dev --secure: one SASL_SSL listener at plain dev's address, its
// key store the certificate generated under the data directory, SCRAM
// only unless --set says otherwise.
func TestLoadConfigDevSecure(t *testing.T) {
	dir := t.TempDir()
	cfg, err := loadConfig("", overrides{secure: true, dataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Listeners) != 1 || cfg.Listeners[0].Address != "127.0.0.1:9092" || cfg.Listeners[0].Protocol != "SASL_SSL" || !cfg.DevSecure {
		t.Fatalf("listeners %+v (secure %v)", cfg.Listeners, cfg.DevSecure)
	}
	sec, err := cfg.ListenerSecurity(cfg.Listeners[0])
	if err != nil {
		t.Fatal(err)
	}
	if sec.TLS.KeystoreLocation != filepath.Join(dir, "tls", "server.pem") || strings.Join(sec.Mechanisms, ",") != "SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Errorf("security %+v", sec)
	}
	cfg, err = loadConfig("", overrides{secure: true, dataDir: dir, kafkaAddr: "127.0.0.1:19092", set: []string{"sasl.enabled.mechanisms=PLAIN"}})
	if err != nil {
		t.Fatal(err)
	}
	if sec, _ := cfg.ListenerSecurity(cfg.Listeners[0]); cfg.Listeners[0].Address != "127.0.0.1:19092" || strings.Join(sec.Mechanisms, ",") != "PLAIN" {
		t.Errorf("--kafka-addr and --set: %+v %+v", cfg.Listeners, sec)
	}
	t.Setenv("SLUICE_BOOTSTRAP_USER", "no-colon")
	if _, err := loadConfig("", overrides{secure: true, dataDir: dir}); err == nil || !strings.Contains(err.Error(), "name:password") {
		t.Errorf("a bootstrap user without a password: %v", err)
	}
}

// replica.one.voter chose one-voter raft groups for `sluice dev` before they
// became the only single-node data path: a config file that still sets it
// loads (runNode logs that the key is ignored) instead of failing as an
// unknown key would.
func TestLoadConfigDeprecatedOneVoter(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(file, []byte("replica.one.voter: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(file, overrides{})
	if err != nil {
		t.Fatalf("a config file with replica.one.voter: %v", err)
	}
	if !cfg.ReplicaOneVoter {
		t.Error("replica.one.voter: true was not read (runNode would not warn)")
	}
}
