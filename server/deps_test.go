package server

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServerDepsNoStorage checks the seam between the Kafka front end and
// the partitions: server reaches partitions through package partition's
// interfaces only, so neither the raft replicas (replica) nor the storage
// under them (log) is among the packages server is built from. go list
// reads the import graph of the package as built, not of its tests (which
// open real raft hosts and may import both).
func TestServerDepsNoStorage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	root := strings.TrimSpace(string(mod))
	forbidden := map[string]bool{root + "/log": true, root + "/replica": true}
	var sawPartition bool
	for _, p := range strings.Fields(string(out)) {
		if forbidden[p] {
			t.Errorf("server depends on %s; it must reach partitions through %s/partition only", p, root)
		}
		sawPartition = sawPartition || p == root+"/partition"
	}
	if !sawPartition {
		t.Errorf("server does not depend on %s/partition: the dependency list is not the one this test means to check:\n%s", root, out)
	}
}
