package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/internal/s3test"
)

// The S3 backend is tested against a real S3 server started here on
// loopback with a data directory of its own (package s3test): S3Proxy in
// `make test` (SLUICE_S3PROXY_JAR names its jar, which make test-setup
// fetches), SeaweedFS's weed in `make test-s3` (SLUICE_WEED names the
// binary it builds). Without either the tests are skipped, and fail under
// CI=true.

var server struct {
	once     sync.Once
	endpoint string
	err      error
	missing  string
	srv      *s3test.Server
}

// serverEndpoint starts one S3 server for the test binary and returns the
// host:port it serves S3 on.
func serverEndpoint(t *testing.T) string {
	t.Helper()
	server.once.Do(func() {
		server.srv, server.missing, server.err = s3test.FromEnv("sluice-ready")
		if server.srv != nil {
			server.endpoint = server.srv.Endpoint
		}
	})
	if server.missing != "" {
		skipMissing(t, server.missing)
	}
	if server.err != nil {
		t.Fatal(server.err)
	}
	return server.endpoint
}

func TestMain(m *testing.M) {
	code := m.Run()
	if server.srv != nil {
		server.srv.Close()
	}
	os.Exit(code)
}

// skipMissing skips a test that needs something this machine lacks; under
// CI=true that is a failure, and SLUICE_SKIP_FILE collects the skips that
// `make test` lists at the end.
func skipMissing(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true, so this is a failure)", what)
	}
	if name := os.Getenv("SLUICE_SKIP_FILE"); name != "" {
		if f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%s: %s\n", t.Name(), what)
			f.Close()
		}
	}
	t.Skip(what)
}

// newS3 opens a store in the test bucket under a prefix of its own, so
// every test starts empty, and deletes what the test left there at the end.
//
// SLUICE_S3_ENDPOINT points the tests at another S3-compatible store (a
// real bucket) instead of the server started here: SLUICE_S3_BUCKET (which must
// exist), SLUICE_S3_TLS=true, SLUICE_S3_PATH_STYLE=true, SLUICE_S3_REGION,
// and the credentials in SLUICE_S3_ACCESS_KEY and SLUICE_S3_SECRET_KEY or,
// without them, AWS's environment, credentials file or instance role.
func newS3(t *testing.T, conditional bool) *S3 {
	t.Helper()
	var r [6]byte
	rand.Read(r[:]) //nolint:errcheck
	cfg := S3Config{
		Endpoint: os.Getenv("SLUICE_S3_ENDPOINT"), Bucket: os.Getenv("SLUICE_S3_BUCKET"),
		TLS: os.Getenv("SLUICE_S3_TLS") == "true", PathStyle: os.Getenv("SLUICE_S3_PATH_STYLE") == "true",
		Region:    os.Getenv("SLUICE_S3_REGION"),
		AccessKey: os.Getenv("SLUICE_S3_ACCESS_KEY"), SecretKey: os.Getenv("SLUICE_S3_SECRET_KEY"),
		Prefix:            "sluice-objstore-test-" + hex.EncodeToString(r[:]) + "/",
		ConditionalWrites: conditional,
	}
	external := cfg.Endpoint != ""
	if !external {
		cfg.Endpoint, cfg.Bucket, cfg.PathStyle = serverEndpoint(t), "sluice-test", true
		cfg.AccessKey, cfg.SecretKey = s3test.AccessKey, s3test.SecretKey
	}
	s, err := OpenS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !external {
		if err := s.CreateBucket(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var keys []string
		if err := s.List(ctx, "", func(o ObjectInfo) error { keys = append(keys, o.Key); return nil }); err != nil {
			t.Errorf("cleaning up %s: %v", cfg.Prefix, err)
		}
		for _, k := range keys {
			if err := s.Delete(ctx, k); err != nil {
				t.Errorf("cleaning up %s: %v", cfg.Prefix, err)
				break
			}
		}
		s.Close()
	})
	return s
}

func TestS3(t *testing.T) {
	testStore(t, newS3(t, true), true)
}

func TestS3WithoutConditionalWrites(t *testing.T) {
	testStore(t, newS3(t, false), false)
}

// Two stores with different prefixes in one bucket (two clusters sharing
// it) never see each other's objects.
func TestS3Prefixes(t *testing.T) {
	ctx := context.Background()
	a, b := newS3(t, true), newS3(t, true)
	mustPut(t, a, "k", []byte("a"))
	mustPut(t, b, "k", []byte("b"))
	for _, c := range []struct {
		s    *S3
		want string
	}{{a, "a"}, {b, "b"}} {
		if got, err := c.s.Get(ctx, "k"); err != nil || !bytes.Equal(got, []byte(c.want)) {
			t.Errorf("Get(k) under %s = %q, %v; want %q", c.s.cfg.Prefix, got, err, c.want)
		}
		if keys := listKeys(t, c.s, ""); len(keys) != 1 || keys[0] != "k" {
			t.Errorf("List under %s = %q, want [k]", c.s.cfg.Prefix, keys)
		}
	}
	if err := a.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "k"); err != nil || string(got) != "b" {
		t.Errorf("a's Delete reached b: %q, %v", got, err)
	}
}

// The store's errors for a server that refuses the credentials are plain
// failures, never one of the sentinels a caller acts on.
func TestS3BadCredentials(t *testing.T) {
	if os.Getenv("SLUICE_S3_ENDPOINT") != "" {
		t.Skip("runs against the server started here only")
	}
	endpoint := serverEndpoint(t)
	s, err := OpenS3(S3Config{Endpoint: endpoint, Bucket: "sluice-ready", PathStyle: true,
		AccessKey: s3test.AccessKey, SecretKey: "wrong", ConditionalWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = s.Put(ctx, "x", []byte("x"))
	if err == nil {
		t.Fatal("Put with a wrong secret key succeeded")
	}
	for _, sentinel := range []error{ErrNotFound, ErrExists, ErrInvalidRange, ErrInvalidKey, ErrUnsupported} {
		if errors.Is(err, sentinel) {
			t.Fatalf("Put with a wrong secret key: %v is %v", err, sentinel)
		}
	}
	if _, err := s.Get(ctx, "ready"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("Get with a wrong secret key: %v", err)
	}
}
