package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// smallFS mounts a tmpfs of size bytes (tmpfs answers a full disk with
// ENOSPC like any file system) and unmounts it when the test ends. It
// skips the test when that cannot be done here (not root, no mount
// permission), and fails instead under CI=true.
func smallFS(t *testing.T, size int64) string {
	t.Helper()
	unavailable := func(why string) {
		t.Helper()
		skipMissing(t, "cannot mount a small tmpfs: "+why)
	}
	if os.Geteuid() != 0 {
		unavailable("not root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		unavailable(err.Error())
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Logf("unmount %s: %v; detaching", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// fillFS writes a file of zeros under dir until the file system has at
// most leave bytes free, and returns its path.
func fillFS(t *testing.T, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 256<<10)
	for freeBytes(t, dir) > leave {
		n := min(int64(len(chunk)), freeBytes(t, dir)-leave)
		if _, err := f.Write(chunk[:n]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	return path
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// exited says the process is gone or a zombie nobody waited for.
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}

// peakRSS is the process's VmHWM in KiB.
func peakRSS(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// TestDevDiskFull runs a one-node broker (every role, as `sluice dev`: each
// partition a one-voter raft group) with its data directory on a 64 MiB
// tmpfs and an acks=all idempotent franz-go producer writing 16 KiB
// records until the disk is full. The broker must answer Produce with
// KAFKA_STORAGE_ERROR and stay up, keep serving Metadata, ListOffsets and
// Fetch of every acknowledged record, survive offset commits that the
// full metastore cannot take, and once the filler file is deleted take
// produce and commits again without a restart. After a clean restart, a
// SIGKILL, and a SIGKILL and a restart on a full disk (the broker must
// wait, not exit, and come up once space is freed), every acknowledged
// record is there once, at its offset, in order, and recovery finds no
// torn batch. Runs with per-partition segment syncs (the default) and
// with the broker-wide WAL (log.wal.enable). Costs about 47 s each with
// -race (15 s of it waiting on the full-disk restart).
func TestDevDiskFull(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	t.Run("segments", func(t *testing.T) { testDiskFull(t, "") })
	t.Run("wal", func(t *testing.T) { testDiskFull(t, "log.wal.enable: true\n") })
}

func testDiskFull(t *testing.T, extraConfig string) {
	mnt := smallFS(t, 64<<20)
	dir := t.TempDir()
	ports := freePorts(t, 2)
	kafka, admin := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	cfg := filepath.Join(dir, "node.yaml")
	body := fmt.Sprintf("node.id: 1\nprocess.roles: [meta, write, read]\ndata.dir: %s\nadmin.addr: %s\nlisteners:\n  - name: PLAINTEXT\n    view: mixed\n    address: %s\nauto.create.topics.enable: false\n%s",
		filepath.Join(mnt, "data"), admin, kafka, extraConfig)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	lf, err := os.Create(filepath.Join(dir, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: "node", cfg: cfg, admin: admin, logf: lf}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(lf.Name())
			t.Logf("broker log tail:\n%s", tail(b, 4000))
		}
	})
	p.start(t)
	waitReady(t, admin, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	const topic = "full"
	acl, err := kgo.NewClient(kgo.SeedBrokers(kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	// Leave room for a few MiB of records, then produce until it is gone.
	filler := fillFS(t, mnt, 6<<20)
	prod, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	acked := map[string]int64{} // key -> offset of every acknowledged record
	next := 0
	produceRound := func() (ok int, errs map[string]int) {
		errs = map[string]int{}
		var rs []*kgo.Record
		for range 8 {
			v := make([]byte, 16<<10)
			rand.Read(v) // incompressible, so the disk fills
			rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(next)), Value: v})
			next++
		}
		pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
		defer pcancel()
		for _, r := range prod.ProduceSync(pctx, rs...) {
			if r.Err != nil {
				errs[r.Err.Error()]++
				continue
			}
			acked[string(r.Record.Key)] = r.Record.Offset
			ok++
		}
		return ok, errs
	}
	full := false
	for round := 0; round < 100 && !full; round++ { // 100 x 128 KiB is twice the room left
		ok, errs := produceRound()
		if ok == 0 {
			full = true
			t.Logf("producer (acks=all, idempotent) once the disk was full: %v", errs)
		}
	}
	if !full || len(acked) == 0 {
		t.Fatalf("disk never filled (%d records acknowledged)", len(acked))
	}
	t.Logf("%d records acknowledged before the disk was full; %d bytes free", len(acked), freeBytes(t, mnt))

	// What a client that does not retry sees.
	probe, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.DefaultProduceTopic(topic),
		kgo.DisableIdempotentWrite(), kgo.RecordRetries(1), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	v := make([]byte, 512<<10) // more than the room left
	rand.Read(v)
	err = probe.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce on a full disk: %v, want KAFKA_STORAGE_ERROR", err)
	}

	verify := func(stage string) {
		t.Helper()
		vctx, vcancel := context.WithTimeout(ctx, 30*time.Second)
		defer vcancel()
		if _, err := adm.Metadata(vctx, topic); err != nil {
			t.Fatalf("%s: metadata: %v", stage, err)
		}
		ends, err := adm.ListEndOffsets(vctx, topic)
		if err != nil || ends.Error() != nil {
			t.Fatalf("%s: list offsets: %v %v", stage, err, ends.Error())
		}
		end, _ := ends.Lookup(topic, 0)
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		seen := map[string]int64{}
		var off int64
		for off < end.Offset {
			fs := cl.PollFetches(vctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("%s: fetch at %d of %d: %v", stage, off, end.Offset, err)
			}
			for _, r := range fs.Records() {
				if r.Offset != off {
					t.Fatalf("%s: record at offset %d, want %d (gap or duplicate)", stage, r.Offset, off)
				}
				if _, dup := seen[string(r.Key)]; dup {
					t.Fatalf("%s: key %s twice", stage, r.Key)
				}
				seen[string(r.Key)] = r.Offset
				off++
			}
		}
		for k, o := range acked {
			if got, ok := seen[k]; !ok || got != o {
				t.Fatalf("%s: acknowledged record %s at offset %d: found %v at %d", stage, k, o, ok, got)
			}
		}
		t.Logf("%s: %d records read in order, %d acknowledged all there", stage, end.Offset, len(acked))
	}
	verify("disk full")

	// Offset commits with not a byte free: the metastore cannot persist
	// them once bbolt needs a new page (they then time out); the broker
	// must stay up.
	fillFS(t, mnt, 0)
	commit := func(at int64, timeout time.Duration) error {
		cctx, ccancel := context.WithTimeout(ctx, timeout)
		defer ccancel()
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
		r, err := adm.CommitOffsets(cctx, "g", offs)
		if err == nil {
			err = r.Error()
		}
		return err
	}
	// exhaustMeta commits offsets until the metastore has had no room
	// for a few of them (bbolt first uses the free pages in its file).
	exhaustMeta := func() int {
		failed := 0
		for i := range 40 {
			if err := commit(int64(i), 2*time.Second); err != nil {
				failed++
			}
			if failed > 2 {
				break
			}
		}
		return failed
	}
	t.Logf("offset commits on the full disk: %d failed or timed out", exhaustMeta())
	waitReady(t, admin, 5*time.Second) // fails the test if the broker exited

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freedAt := time.Now()
	for {
		ok, errs := produceRound()
		if ok == 8 {
			break
		}
		if time.Since(freedAt) > 30*time.Second {
			t.Fatalf("produce still failing 30 s after space was freed: %v", errs)
		}
	}
	t.Logf("produce succeeded %v after space was freed, without a restart", time.Since(freedAt).Round(time.Millisecond))
	for range 4 {
		if ok, errs := produceRound(); ok != 8 {
			t.Fatalf("produce after space was freed: %v", errs)
		}
	}
	if err := commit(1000, 20*time.Second); err != nil {
		t.Fatalf("offset commit after space was freed: %v", err)
	}
	verify("space freed")
	t.Logf("broker peak RSS (VmHWM): %s", peakRSS(p.cmd.Process.Pid))

	// A clean restart, a crash, and a crash on a full disk followed by a
	// restart on it (the broker waits to register in its own metastore,
	// past the 10 s metastore request timeout, and comes up once space is
	// freed): nothing acknowledged is lost or duplicated, and recovery
	// finds no torn batch.
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	p.cmd = nil
	restart := func(stage string) {
		t.Helper()
		p.start(t)
		waitReady(t, admin, 60*time.Second)
		verify(stage)
	}
	restart("clean restart")
	p.kill()
	restart("restart after SIGKILL")
	filler = fillFS(t, mnt, 0)
	if ok, _ := produceRound(); ok != 0 {
		t.Fatalf("%d records acknowledged with no byte free", ok)
	}
	exhaustMeta()
	p.kill()
	p.start(t)
	time.Sleep(15 * time.Second)
	if exited(p.cmd.Process.Pid) {
		t.Fatal("broker restarted on a full disk exited")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitReady(t, admin, 60*time.Second)
	verify("restart on a full disk, then space freed")
	if err := commit(2000, 20*time.Second); err != nil {
		t.Fatalf("offset commit after the last restart: %v", err)
	}
	logText, _ := os.ReadFile(lf.Name())
	for _, bad := range []string{"truncating log at the first damaged batch", `"level":"fatal"`, "panic"} {
		if bytes.Contains(logText, []byte(bad)) {
			t.Errorf("broker log contains %q", bad)
		}
	}
}
