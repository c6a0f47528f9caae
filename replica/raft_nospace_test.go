package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/log"
)

// mountSmallFS mounts a tmpfs of size bytes at dir (tmpfs answers a full
// disk with ENOSPC like any file system) and unmounts it when the test
// ends. It skips the test where that cannot be done (not root, no mount
// permission), and fails instead under CI=true.
func mountSmallFS(t *testing.T, dir string, size int64) {
	t.Helper()
	unavailable := func(why string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot mount a small tmpfs: %s (CI=true, so this is a failure)", why)
		}
		t.Skip("cannot mount a small tmpfs: " + why)
	}
	if os.Geteuid() != 0 {
		unavailable("not root")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		unavailable(err.Error())
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// TestRaftDiskFullRecovers: one voter of three has its directory on a
// small file system. Batches are produced (acks=all, idempotent, retried
// as a client would) until that file system is full: the voter's replica
// stops with ErrReplicaFailed (KAFKA_STORAGE_ERROR to clients) and the
// other two go on serving. While the disk stays full (8 s) the replica
// stays offline and the host keeps it; once the filler is deleted the
// host reopens it from its files without a restart within 3 s, it
// catches up, and every
// acknowledged batch is on all three replicas once, at its offset, with
// the logs byte for byte the same.
func TestRaftDiskFullRecovers(t *testing.T) {
	c, full, mnt := fullDiskCluster(t)

	var acked []ackedBatch
	produce := func(value string) {
		t.Helper()
		b := c.idem(value, 4)
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, r := c.leader()
			p, err := r.Propose(append([]byte(nil), b...), AcksAll)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				var res ProduceResult
				res, err = p.Wait(ctx)
				cancel()
				if err == nil {
					acked = append(acked, ackedBatch{res, append([]byte(nil), body(b)...)})
					return
				}
			}
			if errors.Is(err, log.ErrNoSpace) {
				// The full node leads: it refuses batches before raft
				// (checkSpace) and stays up. Hand leadership to a voter
				// with room, so the full node stores the batches as a
				// follower, which is what this test stops.
				if n, lr := c.leader(); n == full {
					_ = lr.TransferLeadership(2)
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrProposalDropped) && !errors.Is(err, context.DeadlineExceeded) &&
				!errors.Is(err, ErrReplicaClosed) && !errors.Is(err, ErrReplicaFailed) {
				t.Fatalf("produce: %v", err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("produce: no answer in 30s (last: %v)", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	pad := strings.Repeat("x", 8<<10)
	for i := range 5 {
		produce(fmt.Sprint("a", i, pad))
	}

	// Leave about 1.5 MiB, then produce until the full node's replica
	// stops: about 48 batches of 32 KiB.
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for freeBytes(t, mnt) > 1536<<10 {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), freeBytes(t, mnt)-1536<<10+4096)]); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	host := c.hosts[full]
	stopped := func() error {
		r, ok := host.Get(c.key)
		if !ok {
			return errors.New("replica gone from the host")
		}
		return r.Failed()
	}
	i := 0
	for ; stopped() == nil; i++ {
		if i == 200 {
			t.Fatalf("node %d never stopped on its full disk (%d bytes free)", full, freeBytes(t, mnt))
		}
		produce(fmt.Sprint("b", i, pad))
	}
	err = stopped()
	if !errors.Is(err, ErrReplicaFailed) || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("node %d stopped with %v, want ErrReplicaFailed on a full disk", full, err)
	}
	t.Logf("node %d stopped after %d batches on a full disk: %v", full, i, err)
	if host.FailedReplicas() != 1 {
		t.Fatalf("FailedReplicas %d, want 1", host.FailedReplicas())
	}
	// The other two serve; the stopped one stays offline while the disk is
	// full (the host's reopen attempts fail or stop again).
	for j := range 10 {
		produce(fmt.Sprint("c", j, pad))
	}
	// Long enough for a reopen backoff that grew while the disk was full
	// to reach 8 s (the next attempt would then come about 7 s after the
	// space returns).
	time.Sleep(8 * noSpaceRetry)
	if r, _ := host.Get(c.key); r.Failed() == nil && freeBytes(t, mnt) < 64<<10 {
		// Reopened: it may serve reads, but its next append must stop it
		// again.
		produce("d")
		checkFor(t, 10*time.Second, func() error {
			if stopped() == nil {
				return errors.New("serving on a full disk")
			}
			return nil
		})
	}

	// Space back: the host reopens the replica by itself.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	checkFor(t, 30*time.Second, stopped)
	back := time.Since(freed)
	t.Logf("node %d serving again %v after space was freed", full, back.Round(time.Millisecond))
	// The host looks at the free space every noSpaceRetry/4 and reopens
	// as soon as there is room, whatever the disk went through before.
	if back > 3*time.Second {
		t.Errorf("node %d served again only %v after space was freed, want within 3 s", full, back.Round(time.Millisecond))
	}
	if host.FailedReplicas() != 0 {
		t.Fatalf("FailedReplicas %d after the reopen, want 0", host.FailedReplicas())
	}
	r, _ := host.Get(c.key)
	c.mu.Lock()
	c.reps[full] = r
	c.mu.Unlock()
	for j := range 5 {
		produce(fmt.Sprint("e", j, pad))
	}
	c.converged(acked[len(acked)-1].res.LastOffset+1, 30*time.Second)
	c.checkAcked(acked)
}

// TestRaftFullLeaderHandsOffAndStops: a leader whose file system has room
// for its followers' rule (more than proposeReserve free) but not for a
// batch and proposeReserve more refuses the batch and hands its
// leadership to a voter in sync; it then stops as on a full disk instead
// of staying behind as a follower in sync. Before, it stayed, and the new
// leader's preferred-leader rebalance handed leadership straight back to
// it (the new leader heard from it, so TransferLeadership accepted it),
// where it refused batches and handed it away again: the cluster test
// TestClusterWriteBrokerDiskFull saw a record of that partition wait past
// its 40 s delivery timeout. Here the new leader's TransferLeadership to
// the full node is refused (it is not heard from), batches are taken, and
// once space is freed the node is reopened and catches up.
func TestRaftFullLeaderHandsOffAndStops(t *testing.T) {
	c, full, mnt := fullDiskCluster(t, slowElections)

	var acked []ackedBatch
	produce := func(value string) {
		t.Helper()
		b := c.idem(value, 1)
		acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
	}
	pad := strings.Repeat("x", 8<<10)
	for i := range 3 {
		produce(fmt.Sprint("a", i, pad))
	}
	// The full node leads.
	checkFor(t, 20*time.Second, func() error {
		ln, lr := c.leader()
		if ln == full {
			return nil
		}
		if err := lr.TransferLeadership(full); err != nil && !errors.Is(err, ErrTransferTargetInactive) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
		return fmt.Errorf("node %d leads", ln)
	})
	lr := c.rep(full)

	// Leave proposeReserve and 32 KiB: a follower's entries would still
	// be stored there, a leader's 64 KiB batch is refused.
	const leave = proposeReserve + 32<<10
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for freeBytes(t, mnt) > leave {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), freeBytes(t, mnt)-leave)]); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if free := freeBytes(t, mnt); free <= proposeReserve {
		t.Fatalf("%d bytes free, want more than %d", free, proposeReserve)
	}
	big := c.idem(strings.Repeat("y", 64<<10), 1)
	if _, err := lr.Propose(append([]byte(nil), big...), AcksAll); !errors.Is(err, log.ErrNoSpace) {
		t.Fatalf("leader with %d bytes free took a 64 KiB batch: %v", freeBytes(t, mnt), err)
	}
	newLeader, nr := c.leader(full)
	t.Logf("node %d handed leadership to node %d", full, newLeader)
	// The rebalance's request, once the new leader had time to hear
	// from the node: refused, nothing started. (Before, it was accepted
	// and the full node led again.)
	time.Sleep(500 * time.Millisecond)
	if err := nr.TransferLeadership(full); !errors.Is(err, ErrTransferTargetInactive) {
		t.Fatalf("new leader's transfer back to node %d, whose disk is full: %v, want ErrTransferTargetInactive", full, err)
	}
	if err := lr.Failed(); err == nil || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("node %d after handing leadership away on a full disk: failed = %v, want stopped on a full disk", full, err)
	}
	if n := c.hosts[full].FailedReplicas(); n != 1 {
		t.Fatalf("FailedReplicas %d, want 1", n)
	}
	acked = append(acked, ackedBatch{c.produce(big, AcksAll), append([]byte(nil), body(big)...)})
	for i := range 3 {
		produce(fmt.Sprint("b", i, pad))
	}
	if ln, _ := c.leader(); ln == full {
		t.Fatalf("node %d leads again with its disk full", full)
	}

	// Space back: reopened, caught up.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 30*time.Second, func() error {
		r, ok := c.hosts[full].Get(c.key)
		if !ok {
			return errors.New("replica gone from the host")
		}
		return r.Failed()
	})
	r, _ := c.hosts[full].Get(c.key)
	c.mu.Lock()
	c.reps[full] = r
	c.mu.Unlock()
	produce("c")
	c.converged(acked[len(acked)-1].res.LastOffset+1, 30*time.Second)
	c.checkAcked(acked)
}

// TestRaftStoppedReplicaLeavesISRAtOnce: a follower whose disk fills
// stops and tells the group (the offline notice): the leader drops it
// from its ISR and refuses it as a transfer target at once, not after
// replica.lag.time.max.ms (30 s here), as Kafka's controller drops the
// replicas of a failed log directory. Once space is freed it is reopened,
// heard from and back in the ISR.
func TestRaftStoppedReplicaLeavesISRAtOnce(t *testing.T) {
	c, full, mnt := fullDiskCluster(t, slowElections, func(cfg *HostConfig) { cfg.MaxFollowerLag = 30 * time.Second })

	var acked []ackedBatch
	produce := func(value string) {
		t.Helper()
		b := c.idem(value, 1)
		acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
	}
	pad := strings.Repeat("x", 8<<10)
	produce("a" + pad)
	checkFor(t, 20*time.Second, func() error {
		ln, lr := c.leader()
		if ln != full {
			return nil
		}
		_ = lr.TransferLeadership(2)
		time.Sleep(200 * time.Millisecond)
		return fmt.Errorf("node %d leads", ln)
	})
	produce("b" + pad)
	ln, lr := c.leader()
	inISR := func() bool { return slices.Contains(lr.InSyncReplicas(), full) }
	if !inISR() {
		t.Fatalf("node %d not in leader %d's ISR %v before its disk fills", full, ln, lr.InSyncReplicas())
	}

	// Less than proposeReserve left: the next entries stop node 1.
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for freeBytes(t, mnt) > 512<<10 {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), freeBytes(t, mnt)-512<<10)]); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	produce("c" + pad)
	checkFor(t, 10*time.Second, func() error {
		if c.rep(full).Failed() == nil {
			return fmt.Errorf("node %d not stopped with %d bytes free", full, freeBytes(t, mnt))
		}
		return nil
	})
	stoppedAt := time.Now()
	checkFor(t, 5*time.Second, func() error {
		if inISR() {
			return fmt.Errorf("stopped node %d still in leader %d's ISR %v", full, ln, lr.InSyncReplicas())
		}
		return nil
	})
	t.Logf("node %d out of leader %d's ISR %v after its replica stopped", full, ln, time.Since(stoppedAt).Round(time.Millisecond))
	if n := lr.InSyncVoters(); n != 2 {
		t.Fatalf("InSyncVoters %d, want 2", n)
	}
	if err := lr.TransferLeadership(full); !errors.Is(err, ErrTransferTargetInactive) {
		t.Fatalf("transfer to the stopped node %d: %v, want ErrTransferTargetInactive", full, err)
	}
	if ln2, _ := c.leader(); ln2 != ln {
		t.Fatalf("leader changed from %d to %d meanwhile", ln, ln2)
	}

	// Space back: reopened, heard from, in the ISR again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 30*time.Second, func() error {
		r, ok := c.hosts[full].Get(c.key)
		if !ok {
			return errors.New("replica gone from the host")
		}
		if err := r.Failed(); err != nil {
			return err
		}
		if !inISR() {
			return fmt.Errorf("node %d reopened, not yet in the ISR %v", full, lr.InSyncReplicas())
		}
		return nil
	})
	r, _ := c.hosts[full].Get(c.key)
	c.mu.Lock()
	c.reps[full] = r
	c.mu.Unlock()
	produce("d")
	c.converged(acked[len(acked)-1].res.LastOffset+1, 30*time.Second)
	c.checkAcked(acked)
}

// fullDiskCluster starts three voters (small segments) with node 1's
// directory, mnt, on a 16 MiB file system of its own.
func fullDiskCluster(t *testing.T, tweak ...func(*HostConfig)) (c *testCluster, full NodeID, mnt string) {
	t.Helper()
	opts := ReplicaOptions{Mode: ModeRaft, Log: smallLogConfig()}
	opts.Log.SegmentBytes = 256 << 10
	c = newTestCluster(t, nil, nil, opts, tweak...)
	c.members = Members{Voters: []NodeID{1, 2, 3}}
	full = 1
	mnt = c.nodeDir(full)
	mountSmallFS(t, mnt, 16<<20)
	c.startAll()
	return c, full, mnt
}
