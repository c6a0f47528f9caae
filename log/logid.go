package log

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/sluice-broker/sluice/internal/fsutil"
	"hash/crc32"
	"os"
	"path/filepath"
)

// logIDFile names a log in the write-ahead log. It is created with a fresh
// random id when a log directory is first opened, so a topic deleted and
// created again under the same name (a new directory) never receives the
// records of the old one, and it holds the truncation epoch, which
// TruncateTo raises before it cuts anything so that WAL records written
// before the cut are never replayed.
//
//	"SLID" | version uint16 (1) | crc uint32 (CRC-32C of the rest) |
//	id [16]byte | truncation epoch uint32
const (
	logIDFile    = "log-id"
	logIDMagic   = "SLID"
	logIDVersion = 1
	logIDSize    = 4 + 2 + 4 + 16 + 4
)

type logIdentity struct {
	id    [16]byte
	epoch uint32
}

func (x logIdentity) encode() []byte {
	b := []byte(logIDMagic)
	b = binary.BigEndian.AppendUint16(b, logIDVersion)
	b = append(b, 0, 0, 0, 0)
	b = append(b, x.id[:]...)
	b = binary.BigEndian.AppendUint32(b, x.epoch)
	binary.BigEndian.PutUint32(b[6:], crc32.Checksum(b[10:], castagnoli))
	return b
}

func decodeLogIdentity(b []byte) (logIdentity, error) {
	var x logIdentity
	if len(b) != logIDSize || string(b[:4]) != logIDMagic ||
		binary.BigEndian.Uint16(b[4:]) != logIDVersion ||
		binary.BigEndian.Uint32(b[6:]) != crc32.Checksum(b[10:], castagnoli) {
		return x, fmt.Errorf("%w: %s is damaged", ErrCorrupt, logIDFile)
	}
	copy(x.id[:], b[10:26])
	x.epoch = binary.BigEndian.Uint32(b[26:])
	return x, nil
}

// loadIdentity reads dir's log-id file, creating it if there is none. A
// damaged file is an error: without the epoch, replaying the WAL could bring
// back truncated batches, and with a new id it would skip acknowledged ones.
func loadIdentity(dir string) (logIdentity, error) {
	b, err := os.ReadFile(filepath.Join(dir, logIDFile))
	if err == nil {
		x, err := decodeLogIdentity(b)
		if err != nil {
			return x, fmt.Errorf("%w; remove it only if no write-ahead log holds records for this partition", err)
		}
		return x, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return logIdentity{}, err
	}
	var x logIdentity
	if _, err := rand.Read(x.id[:]); err != nil {
		return x, err
	}
	return x, fsutil.WriteFileSync(dir, logIDFile, x.encode())
}
