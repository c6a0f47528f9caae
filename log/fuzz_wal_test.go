package log

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// fuzzWALID is the log id the fuzz target's log is given, so that records
// in the seeds (and mutations of them) are replayed into it.
var fuzzWALID = [16]byte{0x5e, 0xed, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}

// walFuzzSeeds are WAL file bodies (what follows the file header).
func walFuzzSeeds() [][]byte {
	b0 := mkBatch(spec{n: 3, valueSize: 10, ts: 5})
	b1 := mkBatch(spec{n: 1, idem: true, pid: 3, seq: 0, leaderEpoch: 2})
	putBase(b1, 3)
	b2 := mkBatch(spec{n: 2, valueSize: 4})
	putBase(b2, 4)
	other := [16]byte{9}
	var chain []byte
	chain = appendWALRecord(chain, fuzzWALID, 0, 0, b0)
	chain = appendWALRecord(chain, other, 0, 0, b0) // another log
	chain = appendWALRecord(chain, fuzzWALID, 0, 3, b1)
	chain = appendWALRecord(chain, fuzzWALID, 1, 3, b1) // a later epoch
	chain = appendWALRecord(chain, fuzzWALID, 0, 4, b2)
	gap := appendWALRecord(nil, fuzzWALID, 0, 0, b0)
	gap = appendWALRecord(gap, fuzzWALID, 0, 4, b2) // skips 3
	badCRC := bytes.Clone(chain)
	badCRC[len(badCRC)-3] ^= 1
	return [][]byte{
		nil,
		chain,
		chain[:len(chain)-5],
		badCRC,
		gap,
		append(bytes.Clone(chain), bytes.Repeat([]byte{0}, 64)...),
		bytes.Repeat([]byte{0xff}, 100),
	}
}

// FuzzWALRecover feeds arbitrary bytes to the WAL as the body of a file left
// by an earlier process, then opens a log whose id the seeds' records use.
// Scanning must stop at the first bad record with the good ones exactly
// re-encodable, opening must succeed, and the log must hold exactly the
// chain of this log's epoch-0 records that starts at offset 0 and continues
// without a gap, in WAL order.
func FuzzWALRecover(f *testing.F) {
	for _, s := range walFuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(checkWALRecover)
}

func checkWALRecover(t *testing.T, body []byte) {
	file := append(walFileHeader(1), body...)
	size := int64(len(file))
	var reenc []byte
	var want [][]byte
	leo := int64(0)
	stopped := false
	end, bad, err := scanWAL(bytes.NewReader(body), size, func(r *walRecord, pos int64) {
		if !bytes.Equal(file[pos:pos+int64(len(r.batch))], r.batch) {
			t.Fatalf("record batch at %d does not alias the file", pos)
		}
		reenc = appendWALRecord(reenc, r.id, r.epoch, r.base, r.batch)
		if r.id != fuzzWALID || r.epoch != 0 || r.end <= leo || stopped {
			return
		}
		if r.base != leo || !checkCRC(r.batch) {
			stopped = true // replay stops at a gap or a bad batch
			return
		}
		want = append(want, bytes.Clone(r.batch))
		leo = r.end
	})
	if err != nil {
		t.Fatal(err)
	}
	if end < walHeaderSize || end > size || (bad == nil) != (end == size) {
		t.Fatalf("scan ended at %d of %d, bad %v", end, size, bad)
	}
	if !bytes.Equal(reenc, file[walHeaderSize:end]) {
		t.Fatalf("the %d bytes of good records do not re-encode to themselves", end-walHeaderSize)
	}

	root := t.TempDir()
	walDir, logDir := filepath.Join(root, "wal"), filepath.Join(root, "p-0")
	if err := os.MkdirAll(walDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(walDir, walFileName(1)), file, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logDir, logIDFile), logIdentity{id: fuzzWALID}.encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	fl, err := OpenFlusher(FlusherConfig{Policy: FlushGroup, Dir: walDir})
	if err != nil {
		t.Fatalf("WAL open on arbitrary bytes: %v", err)
	}
	defer fl.Close()
	l, err := Open(logDir, testConfig(), Options{Flusher: fl})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	got := readAll(t, l)
	if len(got) != len(want) {
		t.Fatalf("replayed %d batches, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("replayed batch %d differs", i)
		}
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("log end offset %d, want %d", l.LogEndOffset(), leo)
	}
}
