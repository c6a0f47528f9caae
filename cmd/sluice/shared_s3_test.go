package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/sluice-broker/sluice/internal/s3test"
)

// TestSharedS3ClusterLeaderKill is TestSharedClusterLeaderKill over S3:
// every broker of the split cluster writes to and reads from one bucket of
// a real S3 server started here on loopback (package s3test: S3Proxy in
// `make test`, weed in `make test-s3`), the credentials in the brokers'
// environment as on a real deployment. Produced through the write view,
// consumed through the read view, the partition's write leader killed with
// SIGKILL under load: nothing acknowledged is lost, and the whole cluster
// restarted serves everything again.
func TestSharedS3ClusterLeaderKill(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	srv, missing, err := s3test.FromEnv("sluice")
	if missing != "" {
		skipMissing(t, missing)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	testLeaderKill(t, "shared", fmt.Sprintf("shared.storage.type: s3\nshared.storage.s3.endpoint: %s\nshared.storage.s3.bucket: sluice\nshared.storage.s3.path.style: true\n", srv.Endpoint))
}
