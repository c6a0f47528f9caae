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
		{Name: "CLIENT", View: "write", Address: "127.0.0.1:19092"},
		{Name: "READER", View: "read", Address: "0.0.0.0:19192", Advertised: "reader.example.com:19192"},
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
