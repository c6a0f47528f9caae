package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterCoordinatorFencing: the read broker coordinating a group is
// paused (SIGSTOP) past its lease, the other read broker takes the group
// over and commits, then the first resumes (SIGCONT). A commit sent to it
// at once is refused with NOT_COORDINATOR and the group's offsets are not
// rewound, so no record is handed out again through a stale commit.
func TestClusterCoordinatorFencing(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 2)
	const topic, group = "fenced", "fenced-group"
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	wcl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	if _, err := kadm.NewClient(wcl).CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, kadm.NewClient(wcl), topic, 1)

	// Which read broker coordinates the group?
	rcl, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = group
	resp, err := fc.RequestWith(ctx, rcl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	var stale *proc
	var staleAddr, freshAddr string
	for i, r := range c.readers {
		if int32(4+i) == resp.NodeID {
			stale, staleAddr = r, c.readAddrs[i]
		} else {
			freshAddr = c.readAddrs[i]
		}
	}
	if stale == nil {
		t.Fatalf("coordinator %d is not a read broker", resp.NodeID)
	}
	commit := func(cl *kgo.Client, offset int64) error {
		os := kadm.Offsets{}
		os.AddOffset(topic, 0, offset, -1)
		r, err := kadm.NewClient(cl).CommitOffsets(ctx, group, os)
		if err != nil {
			return err
		}
		return r.Error()
	}
	if err := commit(rcl, 10); err != nil {
		t.Fatalf("commit at the coordinator: %v", err)
	}

	// Pause the coordinator past its lease (10 s); the metastore expires
	// it and the other read broker takes the group.
	if err := stale.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			stale.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	fcl, err := kgo.NewClient(kgo.SeedBrokers(freshAddr), kgo.RequestTimeoutOverhead(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer fcl.Close()
	start := time.Now()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = group
		r, err := fc.RequestWith(cctx, fcl)
		ccancel()
		if err == nil && r.ErrorCode == 0 && r.NodeID != resp.NodeID {
			break
		}
		if time.Since(start) > 40*time.Second {
			t.Fatalf("the group did not move off the paused coordinator in 40 s (last: node %v, %v)", r, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("group moved to the other read broker %.1fs after the pause", time.Since(start).Seconds())
	if err := commit(fcl, 20); err != nil {
		t.Fatalf("commit at the new coordinator: %v", err)
	}

	// Resume the stale coordinator and at once send it a commit that
	// would rewind the group.
	if err := stale.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	paused = false
	scl, err := kgo.NewClient(kgo.SeedBrokers(staleAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer scl.Close()
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version = 8
	oc.Group = group
	oc.Generation = -1
	tds, err := kadm.NewClient(wcl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic, ot.TopicID = topic, tds[topic].ID // the client sends v10+ (topic ids) if the broker has it
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	op.Partition, op.Offset = 0, 5
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	kresp, err := scl.SeedBrokers()[0].Request(ctx, oc)
	if err != nil {
		t.Fatalf("OffsetCommit to the resumed coordinator: %v", err)
	}
	code := kresp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	if code != kerr.NotCoordinator.Code {
		t.Errorf("the resumed coordinator answered a commit with %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	offs, err := kadm.NewClient(fcl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := offs.Lookup(topic, 0)
	if !ok || got.At != 20 {
		t.Fatalf("committed offset after the stale commit: %+v (found %v), want 20", got, ok)
	}
	t.Log(fmt.Sprintf("stale coordinator's commit refused with %v; committed offset stays 20", kerr.ErrorForCode(code)))
}

// readyStatus is a broker's /readyz status code (0 when unreachable).
func readyStatus(admin string) int {
	resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + admin + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestClusterReadyzFollowsLease: with every metastore node down, a broker
// cannot renew its lease; /readyz turns 503 once the lease may have
// lapsed, and 200 again after the metastore is back and the broker
// registered again.
func TestClusterReadyzFollowsLease(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 1)
	brokers := append(append([]*proc{}, c.writers...), c.readers...)
	for _, p := range c.meta {
		p.kill()
	}
	start := time.Now()
	for _, b := range brokers {
		for readyStatus(b.admin) != http.StatusServiceUnavailable {
			if time.Since(start) > 30*time.Second {
				t.Fatalf("%s: /readyz still %d 30 s after the metastore went down", b.name, readyStatus(b.admin))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("every broker not ready %.1fs after the metastore went down (lease 10 s)", time.Since(start).Seconds())
	for _, p := range c.meta {
		p.start(t)
	}
	start = time.Now()
	for _, b := range brokers {
		waitReady(t, b.admin, 60*time.Second)
	}
	t.Logf("every broker ready again %.1fs after the metastore restarted", time.Since(start).Seconds())
}
