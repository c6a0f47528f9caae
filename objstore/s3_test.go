//go:build s3

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

	"github.com/sluice-broker/sluice/internal/weedtest"
)

// The S3 backend is tested against a real S3 server: SeaweedFS's weed,
// built from its Go module by `make test-s3` (the Makefile's
// WEED_VERSION), started here on loopback with a data directory of its
// own. SLUICE_WEED names the binary. These tests carry the build tag s3
// and run in `make test-s3`, not in `make test`: building weed costs
// about ten minutes of CPU on a cold Go cache.

const (
	weedAccessKey = weedtest.AccessKey
	weedSecretKey = weedtest.SecretKey
)

var weed struct {
	once     sync.Once
	endpoint string
	err      error
	missing  string
	server   *weedtest.Server
}

// weedEndpoint starts one weed server for the test binary and returns the
// host:port of its S3 gateway.
func weedEndpoint(t *testing.T) string {
	t.Helper()
	weed.once.Do(func() {
		bin := os.Getenv("SLUICE_WEED")
		if bin == "" {
			weed.missing = "SLUICE_WEED is not set: `make test-s3` builds SeaweedFS's weed and names it"
			return
		}
		if _, err := os.Stat(bin); err != nil {
			weed.missing = fmt.Sprintf("SLUICE_WEED=%s: %v (make test-s3 builds it)", bin, err)
			return
		}
		weed.server, weed.err = weedtest.Start(bin, "sluice-ready")
		if weed.err == nil {
			weed.endpoint = weed.server.Endpoint
		}
	})
	if weed.missing != "" {
		skipMissing(t, weed.missing)
	}
	if weed.err != nil {
		t.Fatal(weed.err)
	}
	return weed.endpoint
}

func TestMain(m *testing.M) {
	code := m.Run()
	if weed.server != nil {
		weed.server.Close()
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
// real bucket) instead of the weed server: SLUICE_S3_BUCKET (which must
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
		cfg.Endpoint, cfg.Bucket, cfg.PathStyle = weedEndpoint(t), "sluice-test", true
		cfg.AccessKey, cfg.SecretKey = weedAccessKey, weedSecretKey
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
		t.Skip("runs against the weed server only")
	}
	endpoint := weedEndpoint(t)
	s, err := OpenS3(S3Config{Endpoint: endpoint, Bucket: "sluice-test", PathStyle: true,
		AccessKey: weedAccessKey, SecretKey: "wrong", ConditionalWrites: true})
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
