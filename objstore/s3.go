package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config says where an S3-compatible bucket is and how to reach it.
type S3Config struct {
	// Endpoint is the server's host[:port], without a scheme
	// ("s3.eu-west-1.amazonaws.com", "127.0.0.1:8333").
	Endpoint string
	// TLS selects https.
	TLS bool
	// Bucket holds the objects; it must exist (CreateBucket makes it).
	Bucket string
	// Prefix is put before every key, so that several clusters can share a
	// bucket ("cluster-a/"). Empty or a valid prefix ending in '/'.
	Prefix string
	// Region is the bucket's region; empty asks the server.
	Region string
	// PathStyle addresses the bucket as endpoint/bucket rather than
	// bucket.endpoint: what SeaweedFS, MinIO and Ceph RGW behind a plain
	// host name need.
	PathStyle bool
	// AccessKey and SecretKey (and SessionToken, for temporary credentials)
	// sign requests. Without an AccessKey the credentials come from the
	// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// AWS_SESSION_TOKEN), then the shared credentials file, then the
	// instance's IAM role.
	AccessKey, SecretKey, SessionToken string
	// ConditionalWrites says the server honours If-None-Match: * on PUT
	// (AWS S3 since 2024, MinIO, Ceph RGW since Squid, SeaweedFS), which
	// PutIfAbsent needs. Off, PutIfAbsent returns ErrUnsupported.
	// VerifyConditional checks that a server really does.
	ConditionalWrites bool
	// Transport overrides the HTTP transport (nil: minio-go's default).
	Transport http.RoundTripper
}

// S3 is a Store in a bucket of an S3-compatible object store. Each Put is
// one PUT of the whole object (no multipart upload: objects here are a few
// MiB, and one request per object is what the PUT count is measured in).
// The client retries failed requests with backoff, as minio-go does.
type S3 struct {
	cfg    S3Config
	client *minio.Client
}

// OpenS3 builds a client for cfg. It sends no request.
func OpenS3(cfg S3Config) (*S3, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, errors.New("objstore: S3 needs an endpoint and a bucket")
	}
	if cfg.Prefix != "" && (!strings.HasSuffix(cfg.Prefix, "/") || !validPrefix(cfg.Prefix)) {
		return nil, fmt.Errorf("%w: S3 prefix %q must be a valid key prefix ending in '/'", ErrInvalidKey, cfg.Prefix)
	}
	var creds *credentials.Credentials
	if cfg.AccessKey != "" {
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)
	} else {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{},
		})
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        creds,
		Secure:       cfg.TLS,
		Region:       cfg.Region,
		BucketLookup: lookup,
		Transport:    cfg.Transport,
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: S3 client for %s: %w", cfg.Endpoint, err)
	}
	return &S3{cfg: cfg, client: client}, nil
}

// CreateBucket makes the bucket unless it exists.
func (s *S3) CreateBucket(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return fmt.Errorf("objstore: bucket %s: %w", s.cfg.Bucket, err)
	}
	if ok {
		return nil
	}
	err = s.client.MakeBucket(ctx, s.cfg.Bucket, minio.MakeBucketOptions{Region: s.cfg.Region})
	if err != nil {
		switch minio.ToErrorResponse(err).Code {
		case "BucketAlreadyOwnedByYou", "BucketAlreadyExists":
			return nil
		}
		return fmt.Errorf("objstore: create bucket %s: %w", s.cfg.Bucket, err)
	}
	return nil
}

func (s *S3) putOptions() minio.PutObjectOptions {
	return minio.PutObjectOptions{
		ContentType:      "application/octet-stream",
		DisableMultipart: true,
		// The server checks the body against the digest, so an object is
		// never stored with bytes other than those sent.
		SendContentMd5: true,
	}
}

// Put uploads the object in one PUT.
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	_, err := s.client.PutObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, bytes.NewReader(data), int64(len(data)), s.putOptions())
	if err != nil {
		return s.err("put", key, err)
	}
	return nil
}

// conflictRetries bounds the retries of a conditional PUT that the server
// answered 409 ConditionalRequestConflict (AWS: another conditional write
// of the key was in flight; the outcome is decided by retrying).
const conflictRetries = 5

// PutIfAbsent uploads the object with If-None-Match: *, which the server
// refuses (412 Precondition Failed) when the key exists.
func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if !s.cfg.ConditionalWrites {
		return fmt.Errorf("%w: conditional writes are off for bucket %s", ErrUnsupported, s.cfg.Bucket)
	}
	opts := s.putOptions()
	opts.SetMatchETagExcept("*")
	for attempt := 0; ; attempt++ {
		_, err := s.client.PutObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, bytes.NewReader(data), int64(len(data)), opts)
		if err == nil {
			return nil
		}
		if minio.ToErrorResponse(err).Code == "ConditionalRequestConflict" && attempt < conflictRetries {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
			}
			continue
		}
		return s.err("put", key, err)
	}
}

// Get reads the whole object.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	return s.get(ctx, key, minio.GetObjectOptions{})
}

// GetRange reads part of the object with one ranged GET.
func (s *S3) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := checkRange(key, off, n); err != nil {
		return nil, err
	}
	var opts minio.GetObjectOptions
	switch {
	case n < math.MaxInt64-off:
		if err := opts.SetRange(off, off+n-1); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidRange, err)
		}
	case off > 0:
		// off+n overflows or nearly: to the end of the object, as an
		// open range ("bytes=off-"; from 0, no range at all). A last byte
		// position near MaxInt64 is valid HTTP, but not every server
		// survives it (S3Proxy's answer was cut short).
		if err := opts.SetRange(off, 0); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidRange, err)
		}
	}
	return s.get(ctx, key, opts)
}

func (s *S3) get(ctx context.Context, key string, opts minio.GetObjectOptions) ([]byte, error) {
	obj, err := s.client.GetObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, opts)
	if err != nil {
		return nil, s.err("get", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		return nil, s.err("get", key, err)
	}
	return b, nil
}

// Stat sends a HEAD request.
func (s *S3) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	oi, err := s.client.StatObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return ObjectInfo{}, s.err("stat", key, err)
	}
	return ObjectInfo{Key: key, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// List pages through ListObjectsV2 (1000 keys a request), which returns
// keys in ascending byte order.
func (s *S3) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if !validPrefix(prefix) {
		return fmt.Errorf("%w: prefix %q", ErrInvalidKey, prefix)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the lister's goroutine when fn fails
	for oi := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{
		Prefix:    s.cfg.Prefix + prefix,
		Recursive: true,
	}) {
		if oi.Err != nil {
			return fmt.Errorf("objstore: list %q: %w", prefix, oi.Err)
		}
		key := strings.TrimPrefix(oi.Key, s.cfg.Prefix)
		if !ValidKey(key) {
			continue // not written through this package
		}
		if err := fn(ObjectInfo{Key: key, Size: oi.Size, ModTime: oi.LastModified}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Delete sends a DELETE; S3 answers a missing key with success too.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := s.client.RemoveObject(ctx, s.cfg.Bucket, s.cfg.Prefix+key, minio.RemoveObjectOptions{}); err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil
		}
		return s.err("delete", key, err)
	}
	return nil
}

// Close does nothing: the client holds only pooled HTTP connections,
// which the transport closes when idle.
func (s *S3) Close() error { return nil }

// err maps the S3 error codes the contract names to its sentinels.
func (s *S3) err(op, key string, err error) error {
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchKey", "NotFound":
		return fmt.Errorf("%w: %q", ErrNotFound, key)
	case "InvalidRange":
		return fmt.Errorf("%w: %q: %v", ErrInvalidRange, key, err)
	case "PreconditionFailed":
		return fmt.Errorf("%w: %q", ErrExists, key)
	}
	return fmt.Errorf("objstore: %s %q: %w", op, key, err)
}

var _ Store = (*S3)(nil)
