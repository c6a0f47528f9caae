package main

import (
	"os"
	"path/filepath"
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
	plain, err := cfg.ListenerSecurity(cfg.Listeners[0])
	if err != nil || plain.Protocol != "PLAINTEXT" || plain.TLS.ClientAuth != "none" {
		t.Errorf("PLAIN listener: %+v, %v", plain, err)
	}
	for _, bad := range []string{
		"listener.name.secure.ssl.keystore.colour=red",
		"listener.name.other.ssl.client.auth=required",
		"listener.name.secure.sasl.enabled.mechanisms=GSSAPI",
	} {
		if err := os.WriteFile(file, []byte(props+bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := loadConfig(file, overrides{}); err == nil {
			t.Errorf("%s: loaded without error", bad)
		}
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
