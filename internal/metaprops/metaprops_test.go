package metaprops

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRoundTripAndErrors(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := Load(dir); ok || err != nil {
		t.Fatalf("empty dir: %v %v", ok, err)
	}
	p := Props{NodeID: 7, ClusterID: "c-1", DirectoryID: NewDirectoryID()}
	if err := Write(dir, p); err != nil {
		t.Fatal(err)
	}
	got, ok, err := Load(dir)
	if !ok || err != nil || got != p {
		t.Fatalf("got %+v %v %v, want %+v", got, ok, err, p)
	}
	if a, b := NewDirectoryID(), NewDirectoryID(); a == b || len(a) != 22 {
		t.Fatalf("ids %q %q", a, b)
	}
	// Kafka's own file (written by kafka-storage format) reads too.
	kafka := "#\n#Tue Dec 01 10:00:00 UTC 2026\nnode.id=3\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\nversion=1\ncluster.id=4L6g3nShT-eMCtK--X86sw\n"
	os.WriteFile(filepath.Join(dir, FileName), []byte(kafka), 0o644)
	if got, ok, err := Load(dir); !ok || err != nil || got.NodeID != 3 || got.DirectoryID != "J8aAPcfLQt2bqs1JT_rMgQ" {
		t.Fatalf("kafka file: %+v %v %v", got, ok, err)
	}
	for _, bad := range []string{"node.id=x\ndirectory.id=a\n", "node.id=1\n", "garbage\n"} {
		os.WriteFile(filepath.Join(dir, FileName), []byte(bad), 0o644)
		if _, _, err := Load(dir); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
