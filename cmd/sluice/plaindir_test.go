package main

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/protocol"
	"github.com/sluice-broker/sluice/replica"
)

// TestDevRefusesPlainDataDir: a data directory holding a partition written
// by the plain local logs of earlier versions (records, no raft state) is
// refused at start by `sluice dev`, whose partitions are one-voter raft
// groups: it exits with a message that names the partition and says what to
// do, and leaves the data as it was. The directory is written with
// replica.Manager, the local log store that earlier versions served
// partitions from (it now holds only the __consumer_offsets view).
func TestDevRefusesPlainDataDir(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	logs := filepath.Join(data, "logs")
	m, err := replica.NewManager(logs, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Open("orders", replica.Key{TopicID: [16]byte{1, 2, 3}, Index: 0}, log.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(oneRecordBatch("old")); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadDir(filepath.Join(logs, "orders-0"))
	if err != nil {
		t.Fatal(err)
	}

	ports := freePorts(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "dev", "--data-dir", data, "--kafka-addr", "127.0.0.1:"+strconv.Itoa(ports[0]), "--admin-addr", "127.0.0.1:"+strconv.Itoa(ports[1]))
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("sluice dev on a plain data directory: exit %v (context %v), want a refusal\n%s", err, ctx.Err(), out)
	}
	for _, want := range []string{"orders-0", "without raft", "empty data directory"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("refusal does not say %q:\n%s", want, out)
		}
	}
	after, err := os.ReadDir(filepath.Join(logs, "orders-0"))
	if err != nil || len(after) != len(before) {
		t.Fatalf("the refused partition's files changed: %d before, %d after (%v)", len(before), len(after), err)
	}
	if _, err := os.Stat(filepath.Join(logs, "orders-0", "raft.state")); err == nil {
		t.Fatal("the refused partition got a raft.state")
	}
}

// oneRecordBatch is a v2 batch of one record with value v, base offset 0
// and a valid CRC, as a producer sends it.
func oneRecordBatch(v string) []byte {
	var r []byte
	r = append(r, 0)               // attributes
	r = binary.AppendVarint(r, 0)  // timestamp delta
	r = binary.AppendVarint(r, 0)  // offset delta
	r = binary.AppendVarint(r, -1) // no key
	r = binary.AppendVarint(r, int64(len(v)))
	r = append(r, v...)
	r = binary.AppendVarint(r, 0) // no headers
	rec := binary.AppendVarint(nil, int64(len(r)))
	rec = append(rec, r...)
	h := protocol.BatchHeader{
		Size: int64(protocol.BatchHeaderSize + len(rec)), LeaderEpoch: -1,
		BaseTimestamp: 1700000000000, MaxTimestamp: 1700000000000,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1,
	}
	b := make([]byte, protocol.BatchHeaderSize, protocol.BatchHeaderSize+len(rec))
	h.Put(b)
	b = append(b, rec...)
	protocol.Batch(b).SetCRC()
	return b
}
