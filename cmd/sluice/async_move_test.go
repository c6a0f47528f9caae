package main

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestClusterAsyncReassignAfterFailover: an async partition whose master
// was promoted by a failover (the metastore keeps that promotion's
// takeover point) is then moved off that master. The replicas that stay
// elect a leader in raft's configuration, which finishes the move, makes
// itself the sole voter and records itself master. Before the fix the
// record still named the old master in between (a broker no longer in the
// partition), and the new leader, whose configuration named another sole
// voter than the recorded one, "followed" the old master from the stale
// takeover point: it demoted itself to a learner of a broker that then
// deleted its replica, and the partition stayed without a leader (the
// nemesis' reassign-crash round in async mode: no write and no group
// commit on the moved partition). Now writes resume after the move, a
// broker of the move killed mid-way included, and every acknowledged
// record is read back once.
func TestClusterAsyncReassignAfterFailover(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	const topic = "amove"
	c, ctx, prod, adm := startAsyncTopic(t, topic, 1, 2, 4*time.Minute)
	replicas := func() []int32 {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		for _, id := range md.Topics[topic].Partitions[0].Replicas {
			if int(id) <= len(c.writers) {
				ids = append(ids, id)
			}
		}
		return ids
	}
	first := electedLeaders(t, adm, topic, 1)[0]
	load := startAckedLoad(ctx, prod, "m")
	for deadline := time.Now().Add(30 * time.Second); load.count() < 500; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d records acknowledged in 30 s", load.count())
		}
	}

	// A failover: the master is killed, the other write replica promoted
	// once the lease lapses (the metastore now holds a takeover point).
	c.writers[first-1].kill()
	var promoted int32
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if l := electedLeaders(t, adm, topic, 1)[0]; l != first {
			promoted = l
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d killed, no other master within 40 s", first)
		}
	}
	c.writers[first-1].start(t)
	waitReady(t, c.writers[first-1].admin, 60*time.Second)
	for base, deadline := load.count(), time.Now().Add(30*time.Second); load.count() < base+300; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no writes acknowledged after broker %d was promoted", promoted)
		}
	}

	// The move takes the partition off the promoted master; the broker
	// that stays is killed and restarted while it runs.
	cur := replicas()
	var stays, newcomer int32
	for id := int32(1); id <= int32(len(c.writers)); id++ {
		if !slices.Contains(cur, id) {
			newcomer = id
		} else if id != promoted {
			stays = id
		}
	}
	target := []int32{stays, newcomer}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, target)
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = res[topic][0].Err
	}
	if err != nil {
		t.Fatalf("reassigning %v -> %v: %v", cur, target, err)
	}
	time.Sleep(500 * time.Millisecond)
	c.writers[stays-1].kill()
	time.Sleep(time.Second)
	c.writers[stays-1].start(t)
	waitReady(t, c.writers[stays-1].admin, 60*time.Second)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
		_, moving := lr[topic][0]
		if err == nil && !moving && len(replicas()) == 2 && !slices.Contains(replicas(), promoted) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reassignment %v -> %v not finished within 60 s", cur, target)
		}
	}
	moved := time.Now()
	for base, deadline := load.count(), moved.Add(30*time.Second); load.count() < base+300; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d records acknowledged in the 30 s after the move %v -> %v finished, want 300 (no master?)", load.count()-base, cur, target)
		}
	}
	resumed := time.Since(moved)
	load.halt()
	if err := prod.Flush(ctx); err != nil {
		t.Logf("flush: %v", err)
	}
	found := readAckedOnce(ctx, t, c.readAddrs, topic, load.records())
	t.Logf("master %d failed over to %d, moved %v -> %v with broker %d killed mid-move; writes resumed %v after the move; all %d acknowledged records read once",
		first, promoted, cur, target, stays, resumed.Round(time.Millisecond), found)
}
