package configs

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default() does not validate:\n%v", err)
	}
}

func TestValidateCollectsEveryProblem(t *testing.T) {
	c := Default()
	c.Roles = []string{"writer"}
	c.NumPartitions = 0
	c.LogFsync = "sometimes"
	c.Listeners[0].View = "both"
	c.FetchMaxBytes = math.MaxInt32
	c.QueuedMaxRequestBytes = -2
	c.MaxPartitionsPerRequest = 0
	c.MaxPartitions = -1
	c.ConfigValueMaxBytes = 10
	c.GroupMaxSize = 0
	c.GroupConsumerMaxSize = -5
	c.ReplicaListen = "0.0.0.0:9491"
	err := c.Validate()
	if err == nil {
		t.Fatal("a broken config validated")
	}
	for _, want := range []string{"unknown role", "num.partitions", "log.fsync", "view", "fetch.max.bytes", "queued.max.request.bytes",
		"max.partitions.per.request", "max.partitions must", "config.value.max.bytes", "group.max.size", "group.consumer.max.size", "replica.listen"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestTopicConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		set map[string]string
		ok  bool
	}{
		{map[string]string{"retention.ms": "1000"}, true},
		{map[string]string{"retention.ms": "-1"}, true},
		{map[string]string{"retention.ms": "-2"}, false},
		{map[string]string{"retention.ms": "soon"}, false},
		{map[string]string{"cleanup.policy": "compact"}, true},
		{map[string]string{"cleanup.policy": "compact,delete"}, true},
		{map[string]string{"cleanup.policy": "delete, compact"}, true},
		{map[string]string{"cleanup.policy": "compact,"}, false},
		{map[string]string{"cleanup.policy": "shrink"}, false},
		{map[string]string{"min.cleanable.dirty.ratio": "0.1"}, true},
		{map[string]string{"min.cleanable.dirty.ratio": "1.5"}, false},
		{map[string]string{"max.compaction.lag.ms": "0"}, false},
		{map[string]string{"delete.retention.ms": "0"}, true},
		{map[string]string{"replication.mode": "semi-sync"}, true},
		{map[string]string{"replication.mode": "eventually"}, false},
		{map[string]string{"no.such.config": "1"}, false},
		{map[string]string{"read.replicas": "-1"}, true},
		{map[string]string{"read.replicas": "0"}, true},
		{map[string]string{"read.replicas": "3"}, true},
		{map[string]string{"read.replicas": "-2"}, false},
		{map[string]string{"read.replicas": "all"}, false},
		{map[string]string{"read.replicas": "4294967296"}, false},
	} {
		if err := ValidateTopicConfigs(tc.set); (err == nil) != tc.ok {
			t.Errorf("%v: err %v, want ok=%v", tc.set, err, tc.ok)
		}
	}
}

func TestBrokerConfigNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, bc := range BrokerConfigs(Default()) {
		if seen[bc.Name] {
			t.Errorf("broker config %s listed twice", bc.Name)
		}
		seen[bc.Name] = true
		if bc.Value != bc.Default {
			t.Errorf("%s: default config shows value %q, default %q", bc.Name, bc.Value, bc.Default)
		}
	}
}

// TestReadReplicasBrokerDefault: read.replicas has a dynamic broker
// synonym of the same name, defaulting to -1, settable only cluster-wide
// and validated like the topic config.
func TestReadReplicasBrokerDefault(t *testing.T) {
	var found bool
	for _, bc := range BrokerConfigs(Default()) {
		if bc.Name == "read.replicas" {
			found = true
			if !bc.Dynamic || bc.Default != "-1" || bc.Type != TypeInt {
				t.Fatalf("%+v", bc)
			}
		}
	}
	if !found {
		t.Fatal("read.replicas is not a broker config")
	}
	if !ClusterWideOnly("read.replicas") || ClusterWideOnly("replication.mode") || ClusterWideOnly("no.such.config") {
		t.Fatal("ClusterWideOnly")
	}
	for v, ok := range map[string]bool{"2": true, "-1": true, "-3": false} {
		if err := ValidateDynamicBrokerConfig(Default(), "read.replicas", &v); (err == nil) != ok {
			t.Errorf("read.replicas=%s: %v", v, err)
		}
	}
}

func TestParseConnectionOverrides(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]int32
		err  bool
	}{
		{in: "", want: map[string]int32{}},
		{in: "hostName:100,127.0.0.1:200", want: map[string]int32{"hostName": 100, "127.0.0.1": 200}},
		{in: " a:1 , b : 2 ", want: map[string]int32{"a": 1, "b": 2}},
		{in: "::1:5,[fe80::1]:6", want: map[string]int32{"::1": 5, "fe80::1": 6}},
		{in: "127.0.0.1:0", want: map[string]int32{"127.0.0.1": 0}},
		{in: "127.0.0.1", err: true},
		{in: ":5", err: true},
		{in: "a:x", err: true},
		{in: "a:-1", err: true},
		{in: "a:3000000000", err: true},
		{in: "a:1,", want: map[string]int32{"a": 1}}, // Java's split drops trailing empties
	} {
		got, err := ParseConnectionOverrides(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("%q: error %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if !tc.err && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestValidateConnectionLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"per-ip 0 alone", func(c *Config) { c.MaxConnectionsPerIP = 0 }, false},
		{"per-ip 0 with overrides", func(c *Config) { c.MaxConnectionsPerIP = 0; c.MaxConnectionsPerIPOverrides = "10.0.0.1:5" }, true},
		{"negative max.connections", func(c *Config) { c.MaxConnections = -1 }, false},
		{"negative rate", func(c *Config) { c.MaxConnectionCreationRate = -1 }, false},
		{"idle never", func(c *Config) { c.ConnectionsMaxIdleMs = -1 }, true},
		{"idle 0", func(c *Config) { c.ConnectionsMaxIdleMs = 0 }, false},
		{"request timeout 0", func(c *Config) { c.SocketRequestTimeoutMs = 0 }, false},
		{"request timeout unbounded", func(c *Config) { c.SocketRequestTimeoutMs = -1 }, true},
		{"request stall 0", func(c *Config) { c.QueuedMaxRequestStallMs = 0 }, false},
		{"request stall never", func(c *Config) { c.QueuedMaxRequestStallMs = -1 }, true},
		{"per-connection cap none", func(c *Config) { c.QueuedMaxRequestBytesPerConnection = -1 }, true},
		{"per-connection cap -2", func(c *Config) { c.QueuedMaxRequestBytesPerConnection = -2 }, false},
		{"min request rate 0", func(c *Config) { c.QueuedMinRequestBytesPerSecond = 0 }, false},
		{"min request rate never", func(c *Config) { c.QueuedMinRequestBytesPerSecond = -1 }, true},
		{"bad overrides", func(c *Config) { c.MaxConnectionsPerIPOverrides = "nohost" }, false},
	} {
		c := Default()
		tc.set(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestAuthorizerConfig(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*Config)
		enabled bool
		valid   bool
	}{
		{name: "default: off", mod: func(*Config) {}, valid: true},
		{name: "Kafka's StandardAuthorizer", mod: func(c *Config) {
			c.AuthorizerClassName = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		}, enabled: true, valid: true},
		{name: "Kafka's AclAuthorizer", mod: func(c *Config) { c.AuthorizerClassName = "kafka.security.authorizer.AclAuthorizer" }, enabled: true, valid: true},
		{name: "authorizer.enable", mod: func(c *Config) { c.AuthorizerEnable = true }, enabled: true, valid: true},
		{name: "another class", mod: func(c *Config) { c.AuthorizerClassName = "com.example.MyAuthorizer" }, valid: false},
		{name: "super users", mod: func(c *Config) { c.AuthorizerEnable, c.SuperUsers = true, "User:admin; User:ops" }, enabled: true, valid: true},
		{name: "super user without a type", mod: func(c *Config) { c.SuperUsers = "admin" }, valid: false},
		{name: "pprof.listen", mod: func(c *Config) { c.PprofListen = "127.0.0.1:6060" }, valid: true},
		{name: "pprof.listen without a port", mod: func(c *Config) { c.PprofListen = "127.0.0.1" }, valid: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mod(&c)
			if got := c.AuthorizerEnabled(); got != tt.enabled {
				t.Errorf("AuthorizerEnabled = %v, want %v", got, tt.enabled)
			}
			if err := c.Validate(); (err == nil) != tt.valid {
				t.Errorf("Validate = %v, want valid=%v", err, tt.valid)
			}
		})
	}
}

// TestInternalPortsNeedTLSOrInsecure: a non-loopback replica.listen or
// meta.listen needs internal.ssl.* or internal.insecure; loopback needs
// neither.
func TestInternalPortsNeedTLSOrInsecure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		set      func(c *Config)
		errorHas string
	}{
		{"loopback replication", func(c *Config) { c.ReplicaListen = "127.0.0.1:9491" }, ""},
		{"localhost replication", func(c *Config) { c.ReplicaListen = "localhost:9491" }, ""},
		{"ipv6 loopback replication", func(c *Config) { c.ReplicaListen = "[::1]:9491" }, ""},
		{"private replication, plaintext", func(c *Config) { c.ReplicaListen = "10.0.0.5:9491" }, "replica.listen 10.0.0.5:9491 is not a loopback address"},
		{"host name replication, plaintext", func(c *Config) { c.ReplicaListen = "broker-1:9491" }, "internal.insecure=true"},
		{"private replication, insecure", func(c *Config) { c.ReplicaListen = "10.0.0.5:9491"; c.InternalInsecure = true }, ""},
		{"private replication, TLS", func(c *Config) {
			c.ReplicaListen = "10.0.0.5:9491"
			c.InternalSSLKeystoreLocation, c.InternalSSLTruststoreLocation = "k.pem", "ca.crt"
		}, ""},
		{"TLS without a trust store", func(c *Config) {
			c.ReplicaListen = "10.0.0.5:9491"
			c.InternalSSLKeystoreLocation = "k.pem"
		}, "trust store"},
		{"trust store without a key store", func(c *Config) { c.InternalSSLTruststoreLocation = "ca.crt" }, "internal.ssl.keystore.location is required"},
		{"meta on loopback", func(c *Config) { c.MetaListen = "127.0.0.1:9391" }, ""},
		{"meta on every interface", func(c *Config) { c.MetaListen = "0.0.0.0:9391" }, "meta.listen 0.0.0.0:9391 is not a loopback address"},
		{"meta on every interface, insecure", func(c *Config) { c.MetaListen = ":9391"; c.InternalInsecure = true }, ""},
		{"meta on every interface, TLS", func(c *Config) {
			c.MetaListen = "0.0.0.0:9391"
			c.InternalSSLKeystoreLocation, c.InternalSSLTruststoreLocation = "k.pem", "ca.crt"
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.set(&c)
			err := c.Validate()
			switch {
			case tc.errorHas == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.errorHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errorHas)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.errorHas)
			}
		})
	}
}
