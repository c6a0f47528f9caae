package configs

import (
	"strings"
	"testing"
)

func TestParseListeners(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want []Listener
		err  string
	}{
		{spec: "PLAINTEXT://127.0.0.1:9092", want: []Listener{{Name: "PLAINTEXT", Address: "127.0.0.1:9092"}}},
		{spec: "write://127.0.0.1:9092, READ://:9192", want: []Listener{{Name: "WRITE", Address: "127.0.0.1:9092"}, {Name: "READ", Address: ":9192"}}},
		{spec: "IPV6://[::1]:9092", want: []Listener{{Name: "IPV6", Address: "[::1]:9092"}}},
		{spec: "127.0.0.1:9092", err: "NAME://host:port"},
		{spec: "A://127.0.0.1", err: "missing port"},
		{spec: "A B://127.0.0.1:1", err: "letters, digits"},
		{spec: "A://127.0.0.1:1,a://127.0.0.1:2", err: "named twice"},
	} {
		got, err := ParseListeners(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q: %+v, want %+v", tc.spec, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q: listener %d is %+v, want %+v", tc.spec, i, got[i], tc.want[i])
			}
		}
	}
}

func TestResolveListeners(t *testing.T) {
	for _, tc := range []struct {
		name       string
		listeners  string // Kafka form; empty keeps the YAML list below
		yaml       []Listener
		advertised string
		protoMap   string
		views      string
		logDirs    string
		want       []Listener
		dataDir    string
		err        string
	}{
		{name: "kafka form, views and advertised",
			listeners: "WRITE://127.0.0.1:9092,READ://0.0.0.0:9192", protoMap: "WRITE:PLAINTEXT,READ:PLAINTEXT",
			views: "write:write,READ:read", advertised: "READ://read-1.example.com:9192",
			want: []Listener{{Name: "WRITE", View: "write", Address: "127.0.0.1:9092", Protocol: "PLAINTEXT"}, {Name: "READ", View: "read", Address: "0.0.0.0:9192", Advertised: "read-1.example.com:9192", Protocol: "PLAINTEXT"}}},
		{name: "protocol names need no map entry; view defaults to mixed",
			listeners: "PLAINTEXT://127.0.0.1:9092",
			want:      []Listener{{Name: "PLAINTEXT", View: "mixed", Address: "127.0.0.1:9092", Protocol: "PLAINTEXT"}}},
		{name: "kafka form: a custom name needs a protocol", listeners: "CLIENT://127.0.0.1:9092", err: "not in listener.security.protocol.map"},
		{name: "yaml form: a custom name is plaintext",
			yaml: []Listener{{Name: "KAFKA", View: "write", Address: "127.0.0.1:9092"}},
			want: []Listener{{Name: "KAFKA", View: "write", Address: "127.0.0.1:9092", Protocol: "PLAINTEXT"}}},
		{name: "0.0.0.0 without advertised", listeners: "PLAINTEXT://0.0.0.0:9092", err: "binds every interface"},
		{name: "empty host without advertised", listeners: "PLAINTEXT://:9092", err: "binds every interface"},
		{name: ":: without advertised", listeners: "PLAINTEXT://[::]:9092", err: "binds every interface"},
		{name: "advertised 0.0.0.0", listeners: "PLAINTEXT://0.0.0.0:9092", advertised: "PLAINTEXT://0.0.0.0:9092", err: "not one a client can connect to"},
		{name: "advertised names no listener", listeners: "PLAINTEXT://127.0.0.1:9092", advertised: "OTHER://h:1", err: "not a listener"},
		{name: "views name no listener", listeners: "PLAINTEXT://127.0.0.1:9092", views: "OTHER:read", err: "not a listener"},
		{name: "SSL needs a key store", listeners: "SSL://127.0.0.1:9093", err: "ssl.keystore.location"},
		{name: "mapped to SASL_PLAINTEXT", listeners: "CLIENT://127.0.0.1:9093", protoMap: "CLIENT:SASL_PLAINTEXT",
			want: []Listener{{Name: "CLIENT", View: "mixed", Address: "127.0.0.1:9093", Protocol: "SASL_PLAINTEXT"}}},
		{name: "unknown protocol", listeners: "CLIENT://127.0.0.1:9093", protoMap: "CLIENT:TLS", err: "unknown security protocol"},
		{name: "log.dirs replaces data.dir", listeners: "PLAINTEXT://127.0.0.1:9092", logDirs: "/var/lib/sluice",
			want: []Listener{{Name: "PLAINTEXT", View: "mixed", Address: "127.0.0.1:9092", Protocol: "PLAINTEXT"}}, dataDir: "/var/lib/sluice"},
		{name: "several log.dirs", listeners: "PLAINTEXT://127.0.0.1:9092", logDirs: "/a,/b", err: "one directory only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			kafkaForm := tc.listeners != ""
			if kafkaForm {
				ls, err := ParseListeners(tc.listeners)
				if err != nil {
					t.Fatal(err)
				}
				c.Listeners = ls
			} else {
				c.Listeners = tc.yaml
			}
			c.AdvertisedListeners, c.ListenerViews, c.LogDirs = tc.advertised, tc.views, tc.logDirs
			if tc.protoMap != "" {
				c.ListenerSecurityProtocolMap = tc.protoMap
			}
			err := c.ResolveListeners(kafkaForm)
			if err == nil {
				err = c.Validate()
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Listeners) != len(tc.want) {
				t.Fatalf("listeners %+v, want %+v", c.Listeners, tc.want)
			}
			for i := range tc.want {
				if c.Listeners[i] != tc.want[i] {
					t.Errorf("listener %d is %+v, want %+v", i, c.Listeners[i], tc.want[i])
				}
			}
			if tc.dataDir != "" && c.DataDir != tc.dataDir {
				t.Errorf("data dir %q, want %q", c.DataDir, tc.dataDir)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("resolved config does not validate: %v", err)
			}
		})
	}
}
