package compat

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

const clsShareGroups = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"

func (m *shareRaw) leave() {
	m.t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.MemberEpoch = 1, m.group, m.member, -1
	resp, err := m.c.roundTrip(hb, 1)
	if err != nil {
		m.t.Fatal(err)
	}
	if hr := resp.(*kmsg.ShareGroupHeartbeatResponse); hr.ErrorCode != 0 {
		m.t.Fatalf("leave %s: %v", m.member, kerr.ErrorForCode(hr.ErrorCode))
	}
}

// acceptAll fetches until n records were acquired, accepting each batch
// in the next fetch, and returns the offsets with their delivery counts.
func (m *shareRaw) acceptAll(n int) map[int64]int16 {
	m.t.Helper()
	got := map[int64]int16{}
	var pending []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < n || len(pending) > 0 {
		if time.Now().After(deadline) {
			m.t.Fatalf("%s acquired %d of %d records", m.member, len(got), n)
		}
		f := kmsg.NewPtrShareFetchRequest()
		f.Version, f.GroupID, f.MemberID, f.ShareSessionEpoch = 2, kmsg.StringPtr(m.group), kmsg.StringPtr(m.member), m.epoch
		f.MaxWaitMillis, f.MaxBytes, f.MaxRecords, f.BatchSize = 500, 1<<20, 100, 100
		tp := kmsg.ShareFetchRequestTopicPartition{Partition: 0}
		for _, a := range pending {
			tp.AcknowledgementBatches = append(tp.AcknowledgementBatches, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{
				FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, AcknowledgeTypes: []int8{1}})
		}
		f.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: m.topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{tp}}}
		resp, err := m.c.roundTrip(f, 2)
		if err != nil {
			m.t.Fatal(err)
		}
		r := resp.(*kmsg.ShareFetchResponse)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[0].Partitions[0].AcknowledgeErrorCode != 0 {
			m.t.Fatalf("ShareFetch %s: %+v", m.member, r)
		}
		m.epoch++
		pending = r.Topics[0].Partitions[0].AcquiredRecords
		for _, a := range pending {
			for o := a.FirstOffset; o <= a.LastOffset; o++ {
				got[o] = a.DeliveryCount
			}
		}
	}
	return got
}

// shareToolRows runs kafka-share-groups --describe and returns the start
// offset and lag of each partition of topic it prints.
func shareToolRows(t *testing.T, classpath, addr, group, topic string) (start, lag map[int32]string, out string) {
	t.Helper()
	out = runJava(t, classpath, 2*time.Minute, clsShareGroups, "--bootstrap-server", addr, "--describe", "--group", group)
	start, lag = map[int32]string{}, map[int32]string{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || f[0] != group || f[1] != topic {
			continue
		}
		p, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("kafka-share-groups --describe: cannot parse %q", l)
		}
		start[int32(p)], lag[int32(p)] = f[3], f[len(f)-1]
	}
	return start, lag, out
}

// TestShareGroupOffsetsTool drives the share-group offsets admin APIs
// (DescribeShareGroupOffsets, AlterShareGroupOffsets,
// DeleteShareGroupOffsets) with Kafka's kafka-share-groups tool class
// (ShareGroupCommand 4.4): a member accepts ten records and leaves;
// --describe shows start offset 10 and lag 0; --reset-offsets
// --to-earliest --execute moves it to 0 (lag 10) and a new member gets the
// ten records again, each delivered once more from count 1; a reset is
// refused while the group has a member; --delete-offsets drops the
// state: --describe shows no partition and a new member starts afresh at
// share.auto.offset.reset (earliest here), every record with count 1.
func TestShareGroupOffsetsTool(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	classpath := buildJava(t)
	b := startBroker(t)
	ctx := harness.Context(t, 6*time.Minute)
	adm := newAdmin(t, b.KafkaAddr)
	const topic, group = "share-offsets-tool", "share-offsets-tool-g"
	createTopic(ctx, t, adm, topic, 1, nil)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	setShareGroupConfig(t, b.KafkaAddr, group, "share.auto.offset.reset", "earliest")
	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
	var rs []*kgo.Record
	for i := 0; i < 10; i++ {
		rs = append(rs, &kgo.Record{Value: []byte("r" + strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	member := func(name string) *shareRaw {
		m := &shareRaw{t: t, c: dialRaw(t, b.KafkaAddr), group: group, member: name, topicID: td[topic].ID}
		m.join(topic)
		return m
	}
	a := member("member-a")
	if got := a.acceptAll(10); len(got) != 10 {
		t.Fatalf("member a: %v", got)
	}
	a.leave()

	start, lag, out := shareToolRows(t, classpath, b.KafkaAddr, group, topic)
	if start[0] != "10" || lag[0] != "0" {
		t.Fatalf("--describe after accepting 10: start %v lag %v\n%s", start, lag, out)
	}

	out = runJava(t, classpath, 2*time.Minute, clsShareGroups, "--bootstrap-server", b.KafkaAddr,
		"--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic)
	start, lag, out2 := shareToolRows(t, classpath, b.KafkaAddr, group, topic)
	if start[0] != "0" || lag[0] != "10" {
		t.Fatalf("--describe after --reset-offsets --to-earliest: start %v lag %v\nreset:\n%s\ndescribe:\n%s", start, lag, out, out2)
	}
	c := member("member-c")
	got := c.acceptAll(10)
	for o := int64(0); o < 10; o++ {
		if got[o] != 1 {
			t.Errorf("after the reset offset %d delivered with count %d, want 1 (a fresh start)", o, got[o])
		}
	}
	// A reset while the group has a member is refused.
	out = runJavaErr(t, classpath, clsShareGroups, "--bootstrap-server", b.KafkaAddr,
		"--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic)
	if !strings.Contains(out, "not empty") && !strings.Contains(out, "NonEmpty") && !strings.Contains(out, "GroupNotEmpty") {
		t.Errorf("--reset-offsets on a group with a member:\n%s", out)
	}
	// The broker refuses it too (the tool checks the group's state first).
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = group
	alter.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: topic, Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 0}}}}
	resp, err := dialRaw(t, b.KafkaAddr).roundTrip(alter, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ar := resp.(*kmsg.AlterShareGroupOffsetsResponse); ar.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Errorf("AlterShareGroupOffsets on a group with a member: %v", kerr.ErrorForCode(ar.ErrorCode))
	}
	c.leave()
	// A partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION.
	alter.Topics[0].Partitions[0].Partition = 7
	resp, err = dialRaw(t, b.KafkaAddr).roundTrip(alter, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ar := resp.(*kmsg.AlterShareGroupOffsetsResponse); ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("AlterShareGroupOffsets of partition 7: %+v", ar)
	}

	out = runJava(t, classpath, 2*time.Minute, clsShareGroups, "--bootstrap-server", b.KafkaAddr,
		"--delete-offsets", "--group", group, "--topic", topic)
	start, _, out2 = shareToolRows(t, classpath, b.KafkaAddr, group, topic)
	if len(start) != 0 {
		t.Fatalf("--describe after --delete-offsets still shows %v\ndelete:\n%s\ndescribe:\n%s", start, out, out2)
	}
	// Deleting again: nothing to delete.
	out = runJavaErr(t, classpath, clsShareGroups, "--bootstrap-server", b.KafkaAddr,
		"--delete-offsets", "--group", group, "--topic", topic)
	t.Logf("second --delete-offsets:\n%s", out)
	// The state is gone: the group starts afresh at share.auto.offset.reset
	// (earliest here), every record again with count 1.
	d := member("member-d")
	got = d.acceptAll(10)
	for o := int64(0); o < 10; o++ {
		if got[o] != 1 {
			t.Errorf("after --delete-offsets offset %d delivered with count %d, want 1", o, got[o])
		}
	}
}

// runJavaErr runs a Java main class and returns its stdout and stderr
// together, whatever its exit status.
func runJavaErr(t *testing.T, classpath, class string, args ...string) string {
	t.Helper()
	cmd := exec.Command("java", jvm(classpath, append([]string{class}, args...)...)...)
	out, _ := cmd.CombinedOutput()
	t.Logf("%s %v:\n%s", class, args, tail(string(out), 8<<10))
	return string(out)
}
