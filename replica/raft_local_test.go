package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

// A single node's partition is a one-voter group over the local
// transport: it leads as soon as Open returns (no election timeout), on a
// fresh directory and again after a restart; its first record is offset
// 0 and offsets continue across the restart; idempotent retries are
// deduplicated on both sides of it; and nothing was sent to any peer.
func TestLocalOneVoter(t *testing.T) {
	dir := t.TempDir()
	key := Key{TopicID: [16]byte{7}, Index: 0}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func() (*Host, *LocalTransport, *Replica) {
		tr := NewLocalTransport()
		fl := log.NewFlusher(log.FlusherConfig{Policy: log.FlushGroup, Logger: testLogger(t)})
		fl.Start()
		t.Cleanup(func() { fl.Close() })
		// Elections slowed far past the test's deadline: only the sole
		// voter's own campaign at open can make it leader in time.
		h, err := NewHost(HostConfig{Node: 3, Dir: dir, Transport: tr, Flusher: fl, Logger: testLogger(t), ElectionTicks: 1000})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r, err := h.Open("t", key, Members{Voters: []NodeID{3}}, ReplicaOptions{Mode: ModeRaft, Log: smallLogConfig()})
		if err != nil {
			t.Fatal(err)
		}
		if !r.IsLeader() {
			t.Fatalf("not the leader when Open returned (after %v)", time.Since(start))
		}
		return h, tr, r
	}
	produce := func(r *Replica, b []byte) ProduceResult {
		t.Helper()
		p, err := r.Propose(b, AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	h, tr, r := open()
	if res := produce(r, testBatch("a", 3, 9, 0, 0)); res.BaseOffset != 0 || res.LastOffset != 2 || res.Duplicate {
		t.Fatalf("first batch: %+v, want offsets 0-2", res)
	}
	if res := produce(r, testBatch("a", 3, 9, 0, 0)); res.BaseOffset != 0 || !res.Duplicate {
		t.Fatalf("retry of the first batch: %+v, want the duplicate at 0", res)
	}
	if r.HighWatermark() != 3 {
		t.Fatalf("high watermark %d, want 3", r.HighWatermark())
	}
	if n := tr.Dropped(); n != 0 {
		t.Fatalf("the local transport was asked to send %d messages", n)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}

	h, tr, r = open()
	defer h.Close()
	if res := produce(r, testBatch("a", 3, 9, 0, 0)); res.BaseOffset != 0 || !res.Duplicate {
		t.Fatalf("retry after a restart: %+v, want the duplicate at 0", res)
	}
	if res := produce(r, testBatch("b", 2, 9, 0, 3)); res.BaseOffset != 3 || res.LastOffset != 4 {
		t.Fatalf("after a restart: %+v, want offsets 3-4", res)
	}
	if r.LogStartOffset() != 0 || r.HighWatermark() != 5 {
		t.Fatalf("log start %d, high watermark %d; want 0, 5", r.LogStartOffset(), r.HighWatermark())
	}
	if n := tr.Dropped(); n != 0 {
		t.Fatalf("the local transport was asked to send %d messages", n)
	}
}

// CheckDir refuses a data directory holding a partition written by the
// plain local logs of earlier versions, naming it, and accepts raft
// partitions, empty plain partitions and a missing directory.
func TestCheckDirRefusesPlainLogs(t *testing.T) {
	dir := t.TempDir()
	if err := CheckDir(filepath.Join(dir, "none")); err != nil {
		t.Fatalf("missing directory: %v", err)
	}
	fl := log.NewFlusher(log.FlusherConfig{Policy: log.FlushNever, Logger: testLogger(t)})
	fl.Start()
	defer fl.Close()
	h, err := NewHost(HostConfig{Node: 1, Dir: dir, Transport: NewLocalTransport(), Flusher: fl, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.Open("raft", Key{TopicID: [16]byte{1}}, Members{Voters: []NodeID{1}}, ReplicaOptions{Log: smallLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Propose(testBatch("x", 2, -1, 0, 0), AcksAll)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}

	m, err := NewManager(dir, fl, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open("empty", Key{TopicID: [16]byte{2}}, smallLogConfig()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(dir); err != nil {
		t.Fatalf("raft partition and an empty plain one: %v", err)
	}

	m, err = NewManager(dir, fl, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	pp, err := m.Open("plain", Key{TopicID: [16]byte{3}, Index: 2}, smallLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pp.Append(testBatch("y", 1, -1, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	err = CheckDir(dir)
	if !errors.Is(err, ErrPlainLog) || !strings.Contains(err.Error(), "plain-2") || strings.Contains(err.Error(), "raft-0") || strings.Contains(err.Error(), "empty-0") {
		t.Fatalf("CheckDir with a plain partition holding data: %v, want ErrPlainLog naming plain-2 only", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "plain-2")); err != nil {
		t.Fatalf("CheckDir touched the refused partition: %v", err)
	}
}

// After a restart, a retry of any of a producer's last five batches, not
// only the last, is the duplicate it is. Answering an older one
// OUT_OF_ORDER_SEQUENCE made clients bump their epoch and send it again:
// the batch was written twice (found by the compat suite's kill -9 test on
// a one-voter group).
func TestRaftRetryWindowAfterRestart(t *testing.T) {
	dir := t.TempDir()
	key := Key{TopicID: [16]byte{8}, Index: 0}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func() (*Host, *Replica) {
		fl := log.NewFlusher(log.FlusherConfig{Policy: log.FlushGroup, Logger: testLogger(t)})
		fl.Start()
		t.Cleanup(func() { fl.Close() })
		h, err := NewHost(HostConfig{Node: 1, Dir: dir, Transport: NewLocalTransport(), Flusher: fl, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := h.Open("t", key, Members{Voters: []NodeID{1}}, ReplicaOptions{Mode: ModeRaft, Log: smallLogConfig()})
		if err != nil {
			t.Fatal(err)
		}
		return h, r
	}
	produce := func(r *Replica, b []byte) ProduceResult {
		t.Helper()
		p, err := r.Propose(b, AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Wait(ctx)
		if err != nil {
			t.Fatalf("batch: %v", err)
		}
		return res
	}
	h, r := open()
	var want []ProduceResult
	for i := range 6 {
		want = append(want, produce(r, testBatch(fmt.Sprintf("w%d", i), 2, 77, 0, int32(2*i))))
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h, r = open()
	defer h.Close()
	// Batches 1-5 are the window (batch 0 fell out of it); retried in an
	// order a client's five in-flight requests can arrive in.
	for _, i := range []int{2, 1, 5, 3, 4} {
		res := produce(r, testBatch(fmt.Sprintf("w%d", i), 2, 77, 0, int32(2*i)))
		if !res.Duplicate || res.BaseOffset != want[i].BaseOffset || res.LastOffset != want[i].LastOffset {
			t.Fatalf("retry of batch %d after a restart: %+v, want the duplicate at %d-%d", i, res, want[i].BaseOffset, want[i].LastOffset)
		}
	}
	if hw := r.HighWatermark(); hw != 12 {
		t.Fatalf("high watermark %d after the retries, want 12: a retry was written again", hw)
	}
	if res := produce(r, testBatch("w6", 2, 77, 0, 12)); res.Duplicate || res.BaseOffset != 12 {
		t.Fatalf("next batch: %+v, want offsets 12-13", res)
	}
}

// The raft leader checks a transaction marker before it becomes an entry
// (log.CheckMarker, Kafka's appendEndTxnMarker): a coordinator epoch below
// the producer's last marker's is TRANSACTION_COORDINATOR_FENCED
// (log.ErrCoordinatorFenced), and with transaction version 2 a marker at
// the producer's own epoch is refused (log.ErrInvalidProducerEpoch). The
// refused marker is not written. After a restart the leader still knows
// the last coordinator epoch (seeded from the log's state), and the raft
// snapshot's producer table carries it.
func TestRaftMarkerEpochs(t *testing.T) {
	dir := t.TempDir()
	key := Key{TopicID: [16]byte{9}, Index: 0}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func() (*Host, *Replica) {
		fl := log.NewFlusher(log.FlusherConfig{Policy: log.FlushGroup, Logger: testLogger(t)})
		fl.Start()
		t.Cleanup(func() { fl.Close() })
		h, err := NewHost(HostConfig{Node: 1, Dir: dir, Transport: NewLocalTransport(), Flusher: fl, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := h.Open("t", key, Members{Voters: []NodeID{1}}, ReplicaOptions{Mode: ModeRaft, Log: smallLogConfig()})
		if err != nil {
			t.Fatal(err)
		}
		return h, r
	}
	const pid = 78
	txnData := func(value string, seq int32) []byte {
		b := testBatch(value, 2, pid, 0, seq)
		a := protocol.Batch(b).Attributes() | protocol.AttrTransactional
		binary.BigEndian.PutUint16(b[protocol.BatchAttributesAt:], uint16(a))
		protocol.Batch(b).SetCRC()
		return b
	}
	wait := func(what string, p partition.Proposal, err error) error {
		t.Helper()
		if err != nil {
			return err
		}
		_, err = p.Wait(ctx)
		return err
	}
	marker := func(r *Replica, commit bool, coordEpoch int32, tv int8) error {
		p, err := r.ProposeMarker(protocol.TxnMarkerBatch(pid, 0, commit, coordEpoch, 1700000000000), tv, AcksAll)
		return wait("marker", p, err)
	}
	h, r := open()
	p, err := r.Propose(txnData("a", 0), AcksAll)
	if err := wait("data", p, err); err != nil {
		t.Fatal(err)
	}
	if err := marker(r, true, 10, 0); err != nil {
		t.Fatalf("marker of coordinator epoch 10: %v", err)
	}
	p, err = r.Propose(txnData("b", 2), AcksAll)
	if err := wait("data", p, err); err != nil {
		t.Fatal(err)
	}
	refused := func(r *Replica, what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
		if hw, lso := r.HighWatermark(), r.LastStableOffset(); hw != 5 || lso != 3 {
			t.Errorf("%s: high watermark %d (want 5), last stable %d (want 3): the refused marker was written", what, hw, lso)
		}
	}
	refused(r, "a zombie COMMIT of coordinator epoch 9", marker(r, true, 9, 0), log.ErrCoordinatorFenced)
	refused(r, "a version 2 marker at the producer's epoch", marker(r, false, 11, 2), log.ErrInvalidProducerEpoch)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h, r = open()
	defer h.Close()
	refused(r, "after a restart, a COMMIT of coordinator epoch 9", marker(r, true, 9, 0), log.ErrCoordinatorFenced)
	if err := marker(r, false, 10, 1); err != nil {
		t.Fatalf("an ABORT of coordinator epoch 10 (version 1, same producer epoch): %v", err)
	}
	if lso := r.LastStableOffset(); lso != 6 {
		t.Errorf("last stable offset %d after the abort, want 6", lso)
	}

	// The snapshot's table: the coordinator epoch round-trips; a table
	// encoded before the section existed decodes with none (-1).
	tab := producerTable{pid: {Epoch: 0, CoordEpoch: 10}, 5: {Epoch: 1, CoordEpoch: -1}}
	got, rest, err := decodeProducers(tab.encode(100))
	if err != nil || len(rest) != 0 || got[pid].CoordEpoch != 10 || got[5].CoordEpoch != -1 {
		t.Fatalf("decoded %+v %+v, rest %d, %v", got[pid], got[5], len(rest), err)
	}
	old := tab.encode(100)
	old = old[:len(old)-(8+2*16)-(8+12)] // without the timestamps (magic, count, two entries) and this section (one entry)
	got, rest, err = decodeProducers(old)
	if err != nil || len(rest) != 0 || got[pid].CoordEpoch != -1 || got[pid].Epoch != 0 {
		t.Fatalf("an old table decoded to %+v, rest %d, %v", got[pid], len(rest), err)
	}
}
