package log

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sluice-broker/sluice/protocol"
)

// observe captures everything a caller can see of a log.
func observe(t *testing.T, l *Log) string {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "start %d end %d durable %d\n", l.LogStartOffset(), l.LogEndOffset(), l.DurableOffset())
	for i, batch := range readAll(t, l) {
		fmt.Fprintf(&b, "batch %d base %d crc %x\n", i, baseOf(batch), batch[protocol.BatchCRCAt:protocol.BatchCRCAt+4])
	}
	for pid := int64(0); pid < 5; pid++ {
		st, ok := l.ProducerState(pid)
		fmt.Fprintf(&b, "producer %d %+v %v\n", pid, st, ok)
	}
	for e := int32(-1); e < 8; e++ {
		end, ep := l.OffsetForLeaderEpoch(e)
		fmt.Fprintf(&b, "epoch %d -> %d %d\n", e, end, ep)
	}
	for ts := int64(-1); ts < 4000; ts += 37 {
		off, at, found, err := l.OffsetForTimestamp(ts)
		fmt.Fprintf(&b, "ts %d -> %d %d %v %v\n", ts, off, at, found, err)
	}
	off, ts, err := l.MaxTimestamp()
	fmt.Fprintf(&b, "max %d %d %v\n", off, ts, err)
	for off := l.LogStartOffset(); off < l.LogEndOffset(); off += 7 {
		r, err := l.Read(off, 300, math.MaxInt64)
		fmt.Fprintf(&b, "read %d -> %d bytes next %d %v\n", off, len(r.Data), r.NextOffset, err)
	}
	return b.String()
}

func buildSnapshotLog(t *testing.T, dir string) Config {
	cfg := testConfig()
	cfg.SegmentBytes = 2500
	cfg.IndexIntervalBytes = 200
	l := openT(t, dir, cfg)
	for i := 0; i < 60; i++ {
		pid := int64(i % 3)
		mustAppend(t, l, mkBatch(spec{
			n: 3, valueSize: 40, ts: int64(50 * i), tsDeltas: []int64{7, 0, 3},
			idem: true, pid: pid, seq: int32(3 * (i / 3)), leaderEpoch: int32(1 + i/20),
		}))
	}
	if err := l.DeleteRecordsBefore(10); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestSnapshotOpenMatchesFullRecovery(t *testing.T) {
	dir := t.TempDir()
	cfg := buildSnapshotLog(t, dir)
	l := openT(t, dir, cfg)
	if !l.openedFromSnapshot {
		t.Fatal("clean reopen did not use the snapshot")
	}
	if len(l.segs) < 4 {
		t.Fatalf("only %d segments", len(l.segs))
	}
	fast := observe(t, l)
	fastProducers := producerValues(l.producers)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, cleanShutdownFile))
	l = openT(t, dir, cfg)
	if l.openedFromSnapshot {
		t.Fatal("used a snapshot without the marker")
	}
	slow := observe(t, l)
	if fast != slow {
		t.Fatalf("snapshot open and full recovery differ:\n--- snapshot\n%s\n--- recovery\n%s", fast, slow)
	}
	if got := producerValues(l.producers); !reflect.DeepEqual(got, fastProducers) || len(got) != 3 {
		t.Fatalf("producer state differs:\n%v\n%v", got, fastProducers)
	}
	// Appends continue the same way on both: the next sequences are accepted.
	r, err := l.Append(mkBatch(spec{n: 1, idem: true, pid: 0, seq: 60}))
	if err != nil || r.BaseOffset != 180 {
		t.Fatalf("append: %+v %v", r, err)
	}
	l.Close()
}

func TestSnapshotDistrusted(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, dir string){
		"flipped byte": func(t *testing.T, dir string) {
			p := filepath.Join(dir, cleanShutdownFile)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 1
			os.WriteFile(p, b, 0o644)
		},
		"empty marker": func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, cleanShutdownFile), nil, 0o644)
		},
		"segment grew": func(t *testing.T, dir string) {
			logs := segFiles(t, dir, logSuffix)
			f, _ := os.OpenFile(logs[len(logs)-1], os.O_APPEND|os.O_WRONLY, 0)
			f.Write(bytes.Repeat([]byte{7}, 100))
			f.Close()
		},
		"segment removed": func(t *testing.T, dir string) {
			logs := segFiles(t, dir, logSuffix)
			os.Remove(logs[len(logs)-1])
		},
		"active index garbage": func(t *testing.T, dir string) {
			idx := segFiles(t, dir, indexSuffix)
			os.WriteFile(idx[len(idx)-1], bytes.Repeat([]byte{0xff}, 16), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := buildSnapshotLog(t, dir)
			ref := openT(t, dir, cfg)
			want := observe(t, ref)
			ref.Close()
			damage(t, dir)
			l := openT(t, dir, cfg)
			defer l.Close()
			if name == "segment removed" {
				if l.openedFromSnapshot || l.LogEndOffset() >= 180 {
					t.Fatalf("snapshot %v, leo %d", l.openedFromSnapshot, l.LogEndOffset())
				}
				return
			}
			if name == "active index garbage" {
				// The snapshot is refused and the index rebuilt.
				if l.openedFromSnapshot {
					t.Fatal("trusted a garbage index")
				}
			} else if l.openedFromSnapshot {
				t.Fatal("trusted a damaged snapshot")
			}
			if got := observe(t, l); got != want {
				t.Fatalf("recovery after a distrusted snapshot differs:\n%s\n---\n%s", got, want)
			}
		})
	}
}

func producerValues(p producers) map[int64]ProducerEntry {
	m := map[int64]ProducerEntry{}
	for id, e := range p {
		v := *e
		if len(v.Batches) == 0 {
			v.Batches = nil
		}
		m[id] = v
	}
	return m
}
