// Package metaprops reads and writes a broker data directory's identity,
// meta.properties, in the shape Kafka writes it: the node that owns the
// directory, the cluster it belongs to, and a directory id minted once,
// when the directory is first used. A directory that loses its contents
// (a replaced or wiped disk) gets a new id, which is how the metastore
// tells a broker that lost its raft state from one that restarted.
package metaprops

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// FileName is the file in the data directory.
const FileName = "meta.properties"

// Props is a data directory's identity.
type Props struct {
	NodeID      int32
	ClusterID   string
	DirectoryID string
}

// NewDirectoryID returns a random id in Kafka's Uuid text form (16 bytes,
// URL-safe base64 without padding).
func NewDirectoryID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Load reads dir's meta.properties; ok is false when there is none.
func Load(dir string) (p Props, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return Props{}, false, nil
	}
	if err != nil {
		return Props{}, false, err
	}
	kv := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, found := strings.Cut(line, "=")
		if !found {
			return Props{}, false, fmt.Errorf("%s: malformed line %q", filepath.Join(dir, FileName), line)
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	id, err := strconv.ParseInt(kv["node.id"], 10, 32)
	if err != nil || kv["directory.id"] == "" {
		return Props{}, false, fmt.Errorf("%s: node.id and directory.id are required", filepath.Join(dir, FileName))
	}
	return Props{NodeID: int32(id), ClusterID: kv["cluster.id"], DirectoryID: kv["directory.id"]}, true, nil
}

// Write writes p as dir's meta.properties, atomically and durably.
func Write(dir string, p Props) error {
	body := fmt.Sprintf("#\n# Written by sluice: this directory's identity. Do not copy it to another directory.\n"+
		"version=1\nnode.id=%d\ncluster.id=%s\ndirectory.id=%s\n", p.NodeID, p.ClusterID, p.DirectoryID)
	return fsutil.WriteFileSync(dir, FileName, []byte(body))
}
