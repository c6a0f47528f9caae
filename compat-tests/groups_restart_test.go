package compat

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestGroupSurvivesBrokerKill: two kgo members consume while the broker is
// killed (SIGKILL) and restarted. The coordinator rebuilds the group from
// the metastore: the members carry on with their member ids and generation
// (no new assignment), no record is lost, and the commits end at the end
// offsets. Records whose commit the crash interrupted may be seen twice by
// design (at-least-once), but only those.
func TestGroupSurvivesBrokerKill(t *testing.T) {
	t.Parallel()
	const (
		topic = "grp-kill"
		group = "grp-kill-g"
	)
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, topic, 4, nil)
	produceN(ctx, t, b.KafkaAddr, topic, "a", 400)

	log := &processedLog{seen: map[tpo]int{}, byWho: map[tpo]string{}}
	m1 := startGroupMember(t, b.KafkaAddr, group, topic, "k1", log)
	m2 := startGroupMember(t, b.KafkaAddr, group, topic, "k2", log)
	waitFor(t, time.Minute, "both members to own partitions", func() bool {
		return len(m1.partitions()) > 0 && len(m2.partitions()) > 0
	})
	waitFor(t, time.Minute, "the first 400 records", func() bool { return log.total() >= 400 })
	// Let the assignment settle, then remember it and the member ids.
	time.Sleep(time.Second)
	before := time.Now()
	memberIDs := func() map[string]bool {
		t.Helper()
		dg, err := adm.DescribeGroups(ctx, group)
		if err != nil || dg[group].Err != nil {
			t.Fatalf("DescribeGroups: %v %v", err, dg[group].Err)
		}
		ids := map[string]bool{}
		for _, m := range dg[group].Members {
			ids[m.MemberID] = true
		}
		return ids
	}
	idsBefore := memberIDs()

	b.Kill()
	b.Restart()
	adm = newAdmin(t, b.KafkaAddr)
	produceN(ctx, t, b.KafkaAddr, topic, "b", 400)
	waitFor(t, 2*time.Minute, "all 800 records after the restart", func() bool { return log.total() >= 800 })
	waitFor(t, time.Minute, "lag 0", func() bool {
		_, lag := groupLag(ctx, t, adm, group, topic)
		return lag == 0
	})
	for p := range map[int32]bool{0: true, 1: true, 2: true, 3: true} {
		if m1.assignedAfter(p, before) || m2.assignedAfter(p, before) {
			t.Errorf("partition %d was assigned again after the restart: the group was not rebuilt", p)
		}
	}
	if after := memberIDs(); fmt.Sprint(after) != fmt.Sprint(idsBefore) || len(after) != 2 {
		t.Errorf("members before the kill %v, after %v", idsBefore, after)
	}
	m1.stop()
	m2.stop()
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.seen) != 800 {
		t.Errorf("processed %d distinct records, want 800", len(log.seen))
	}
}
