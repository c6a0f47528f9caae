//go:build s3

package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/sluice-broker/sluice/internal/weedtest"
)

// TestSharedS3ClusterLeaderKill is TestSharedClusterLeaderKill over S3:
// every broker of the split cluster writes to and reads from one bucket of
// a real S3 server (SeaweedFS's weed, started here on loopback; SLUICE_WEED
// names the binary, which `make test-s3` builds), the credentials in the
// brokers' environment as on a real deployment. Produced through the write
// view, consumed through the read view, the partition's write leader killed
// with SIGKILL under load: nothing acknowledged is lost, and the whole
// cluster restarted serves everything again. Build tag s3: it runs in `make
// test-s3`, not in `make test` (weed's cold build costs minutes of CPU).
func TestSharedS3ClusterLeaderKill(t *testing.T) {
	bin := os.Getenv("SLUICE_WEED")
	if bin == "" {
		noteMissing(t, "SLUICE_WEED is not set: `make test-s3` builds SeaweedFS's weed and names it")
		return
	}
	srv, err := weedtest.Start(bin, "sluice")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", weedtest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", weedtest.SecretKey)
	testLeaderKill(t, "shared", fmt.Sprintf("shared.storage.type: s3\nshared.storage.s3.endpoint: %s\nshared.storage.s3.bucket: sluice\nshared.storage.s3.path.style: true\n", srv.Endpoint))
}
