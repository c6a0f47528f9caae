package metastore

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		error string
		peers int
	}{
		{"single", Config{ID: 1, DataDir: "d"}, "", 0},
		{"three", Config{ID: 2, DataDir: "d", PeerList: []string{"1=a:1", "2=b:2", "3=c:3"}}, "", 3},
		{"comma list", Config{ID: 2, DataDir: "d", PeerList: []string{"1=a:1,2=b:2, 3=c:3"}}, "", 3},
		{"even", Config{ID: 1, DataDir: "d", PeerList: []string{"1=a:1", "2=b:2"}}, "use 1, 3 or 5", 2},
		{"self missing", Config{ID: 4, DataDir: "d", PeerList: []string{"1=a:1", "2=b:2", "3=c:3"}}, "does not list", 3},
		{"join may omit self", Config{ID: 4, DataDir: "d", Join: true, PeerList: []string{"1=a:1"}}, "", 1},
		{"bad item", Config{ID: 1, DataDir: "d", PeerList: []string{"a:1"}}, "not id=host:port", 0},
		{"zero id", Config{DataDir: "d"}, "non-zero", 0},
		{"no dir", Config{ID: 1}, "data_dir", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.error == "" && err != nil || tc.error != "" && (err == nil || !strings.Contains(err.Error(), tc.error)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.error)
			}
			if len(tc.cfg.Peers) != tc.peers {
				t.Fatalf("peers %v", tc.cfg.Peers)
			}
		})
	}
	d := Default()
	if d.LeaseDuration == 0 || d.SnapshotEntries == 0 || d.TickInterval == 0 {
		t.Fatalf("defaults %+v", d)
	}
}
