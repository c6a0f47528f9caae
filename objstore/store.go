package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Store is shared storage for immutable objects. The package
// documentation states the contract every implementation keeps.
type Store interface {
	// Put stores data under key, replacing any object there, and returns
	// once the object is durable and visible to every client. data is not
	// retained after Put returns.
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent is Put that succeeds only if no object has the key; it
	// returns ErrExists otherwise, and ErrUnsupported if the store cannot
	// create conditionally.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Get returns the whole object.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange returns the bytes [off, off+n) of the object, fewer when it
	// ends before off+n. off must be below the object's size and n above
	// zero (ErrInvalidRange).
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Stat returns the object's size and modification time.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List calls fn for each object whose key starts with prefix, in
	// ascending byte order of the keys, and returns fn's first error. An
	// empty prefix lists everything.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
	// Delete removes the object; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases the store's resources. It does not wait for calls in
	// flight.
	Close() error
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// MaxKeyLen is the longest key, in bytes: S3's limit.
const MaxKeyLen = 1024

// ValidKey reports whether key follows the key rule: 1 to MaxKeyLen bytes
// of [A-Za-z0-9._=-] and '/', segments separated by single '/', none empty
// and none starting with '.'.
func ValidKey(key string) bool {
	if key == "" || len(key) > MaxKeyLen {
		return false
	}
	return validSegments(key)
}

// validPrefix is the rule for List prefixes: empty, or a valid key that may
// end with '/' and whose last segment may be empty or partial.
func validPrefix(prefix string) bool {
	if prefix == "" {
		return true
	}
	if len(prefix) > MaxKeyLen {
		return false
	}
	p := strings.TrimSuffix(prefix, "/")
	return p != "" && validSegments(p)
}

func validSegments(key string) bool {
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg[0] == '.' {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			switch {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			case c == '.', c == '_', c == '=', c == '-':
			default:
				return false
			}
		}
	}
	return true
}

func checkKey(key string) error {
	if !ValidKey(key) {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	return nil
}

func checkRange(key string, off, n int64) error {
	if off < 0 || n <= 0 {
		return fmt.Errorf("%w: %q offset %d length %d", ErrInvalidRange, key, off, n)
	}
	return nil
}

// VerifyConditional checks that store refuses a second PutIfAbsent of the
// same key: it creates a probe object under probePrefix (a valid key
// prefix ending in '/'), tries to create it again with other bytes, checks
// the first bytes survived, and deletes it. It returns ErrUnsupported when
// the store has no conditional create, and an error naming the problem when
// the store claims one but overwrote the object (an S3 server that ignores
// If-None-Match).
func VerifyConditional(ctx context.Context, store Store, probePrefix string) error {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return err
	}
	key := probePrefix + "conditional-probe-" + hex.EncodeToString(r[:])
	if err := checkKey(key); err != nil {
		return err
	}
	first, second := []byte("first:"+key), []byte("second:"+key)
	if err := store.PutIfAbsent(ctx, key, first); err != nil {
		return err
	}
	defer store.Delete(context.WithoutCancel(ctx), key) //nolint:errcheck // best effort; the probe is tiny
	err := store.PutIfAbsent(ctx, key, second)
	if err == nil {
		return fmt.Errorf("objstore: conditional create of %q succeeded twice: the store does not honour conditional writes", key)
	}
	if !errors.Is(err, ErrExists) {
		return err
	}
	got, err := store.Get(ctx, key)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, first) {
		return fmt.Errorf("objstore: a refused conditional create of %q changed the object", key)
	}
	return nil
}
