package compat

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// shareRaw is one share group member speaking over its own connection.
type shareRaw struct {
	t             *testing.T
	c             *rawConn
	group, member string
	topicID       [16]byte
	epoch         int32
}

func (m *shareRaw) join(topic string) {
	m.t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, m.group, m.member, []string{topic}
	resp, err := m.c.roundTrip(hb, 1)
	if err != nil {
		m.t.Fatal(err)
	}
	if hr := resp.(*kmsg.ShareGroupHeartbeatResponse); hr.ErrorCode != 0 {
		m.t.Fatalf("ShareGroupHeartbeat %s: %v", m.member, kerr.ErrorForCode(hr.ErrorCode))
	}
}

// fetch sends a ShareFetch at the session's next epoch and returns the
// partition's acquired records.
func (m *shareRaw) fetch(maxWait int32) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	m.t.Helper()
	f := kmsg.NewPtrShareFetchRequest()
	f.Version, f.GroupID, f.MemberID, f.ShareSessionEpoch = 2, kmsg.StringPtr(m.group), kmsg.StringPtr(m.member), m.epoch
	f.MaxWaitMillis, f.MaxBytes, f.MaxRecords, f.BatchSize = maxWait, 1<<20, 100, 100
	if m.epoch == 0 {
		f.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: m.topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
	}
	resp, err := m.c.roundTrip(f, 2)
	if err != nil {
		m.t.Fatal(err)
	}
	r := resp.(*kmsg.ShareFetchResponse)
	if r.ErrorCode != 0 {
		m.t.Fatalf("ShareFetch %s epoch %d: %v", m.member, m.epoch, kerr.ErrorForCode(r.ErrorCode))
	}
	m.epoch++
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		m.t.Fatalf("ShareFetch %s: %+v", m.member, r.Topics)
	}
	return r.Topics[0].Partitions[0].AcquiredRecords
}

// TestShareReleaseOnDisconnect: a share group member's acquired records
// are released when the connection its share session was opened on
// closes (as Kafka), not when their acquisition lock expires: with a 60 s
// lock, another member acquires them within seconds, with delivery count
// 2, and the record the first member accepted is not among them. A member
// whose connection stays open keeps its records.
func TestShareReleaseOnDisconnect(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "--set", "group.share.record.lock.duration.ms=60000")
	ctx := harness.Context(t, 2*time.Minute)
	adm := newAdmin(t, b.KafkaAddr)
	const topic, group = "share-disconnect", "share-disconnect-g"
	createTopic(ctx, t, adm, topic, 1, nil)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	setShareGroupConfig(t, b.KafkaAddr, group, "share.auto.offset.reset", "earliest")
	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
	var rs []*kgo.Record
	for _, v := range []string{"r0", "r1", "r2", "r3", "r4"} {
		rs = append(rs, &kgo.Record{Value: []byte(v)})
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
	got := a.fetch(5000)
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 4 || got[0].DeliveryCount != 1 {
		t.Fatalf("member a acquired %+v, want offsets 0-4 once", got)
	}
	// a accepts offset 0 (ShareAcknowledge in its session).
	sa := kmsg.NewPtrShareAcknowledgeRequest()
	sa.Version, sa.GroupID, sa.MemberID, sa.ShareSessionEpoch = 2, kmsg.StringPtr(group), kmsg.StringPtr(a.member), a.epoch
	part := kmsg.NewShareAcknowledgeRequestTopicPartition()
	part.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}
	sa.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: a.topicID, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{part}}}
	resp, err := a.c.roundTrip(sa, 2)
	if err != nil {
		t.Fatal(err)
	}
	if ar := resp.(*kmsg.ShareAcknowledgeResponse); ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ShareAcknowledge: %+v", ar)
	}
	a.epoch++

	// While a's connection is open, b finds nothing.
	bm := member("member-b")
	if got := bm.fetch(1000); len(got) != 0 {
		t.Fatalf("member b acquired %+v while a holds the records", got)
	}
	// a's connection drops: its records come back to b long before the
	// 60 s lock would expire.
	closed := time.Now()
	a.c.conn.Close()
	for {
		got = bm.fetch(2000)
		if len(got) > 0 {
			break
		}
		if time.Since(closed) > 15*time.Second {
			t.Fatalf("member a's records not released %v after its connection closed", time.Since(closed))
		}
	}
	t.Logf("released %v after the connection closed", time.Since(closed))
	if len(got) != 1 || got[0].FirstOffset != 1 || got[0].LastOffset != 4 || got[0].DeliveryCount != 2 {
		t.Fatalf("member b acquired %+v, want offsets 1-4 with delivery count 2", got)
	}
}

// setShareGroupConfig sets a GROUP config (IncrementalAlterConfigs).
func setShareGroupConfig(t *testing.T, addr, group, name, value string) {
	t.Helper()
	ica := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ica.Version = 1
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: name, Value: kmsg.StringPtr(value)}}
	ica.Resources = append(ica.Resources, res)
	resp, err := dialRaw(t, addr).roundTrip(ica, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.IncrementalAlterConfigsResponse); r.Resources[0].ErrorCode != 0 {
		t.Fatalf("group config %s: %v", name, kerr.ErrorForCode(r.Resources[0].ErrorCode))
	}
}

// TestShareAckAfterLeave: leaving a share group does not end the member's
// share session (as Kafka, whose share-partition leader does not check
// group membership): a client that leaves and then closes its session
// with its last acknowledgements (librdkafka's share consumer sends the
// two on different connections at once) has them applied, and nothing it
// accepted is delivered again.
func TestShareAckAfterLeave(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "--set", "group.share.record.lock.duration.ms=60000")
	ctx := harness.Context(t, 2*time.Minute)
	adm := newAdmin(t, b.KafkaAddr)
	const topic, group = "share-ack-after-leave", "share-ack-after-leave-g"
	createTopic(ctx, t, adm, topic, 1, nil)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	setShareGroupConfig(t, b.KafkaAddr, group, "share.auto.offset.reset", "earliest")
	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("r0")}, &kgo.Record{Value: []byte("r1")}, &kgo.Record{Value: []byte("r2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	a := &shareRaw{t: t, c: dialRaw(t, b.KafkaAddr), group: group, member: "member-a", topicID: td[topic].ID}
	a.join(topic)
	if got := a.fetch(5000); len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 2 {
		t.Fatalf("member a acquired %+v, want 0-2", got)
	}
	leave := &shareRaw{t: t, c: dialRaw(t, b.KafkaAddr), group: group, member: a.member}
	leave.leave()
	// The closing ShareAcknowledge accepts 0-1 and releases 2.
	sa := kmsg.NewPtrShareAcknowledgeRequest()
	sa.Version, sa.GroupID, sa.MemberID, sa.ShareSessionEpoch = 2, kmsg.StringPtr(group), kmsg.StringPtr(a.member), -1
	part := kmsg.NewShareAcknowledgeRequestTopicPartition()
	part.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
		{FirstOffset: 0, LastOffset: 1, AcknowledgeTypes: []int8{1}}, {FirstOffset: 2, LastOffset: 2, AcknowledgeTypes: []int8{2}}}
	sa.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: a.topicID, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{part}}}
	resp, err := a.c.roundTrip(sa, 2)
	if err != nil {
		t.Fatal(err)
	}
	if ar := resp.(*kmsg.ShareAcknowledgeResponse); ar.ErrorCode != 0 || len(ar.Topics) != 1 || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("closing ShareAcknowledge after leaving: %+v", ar)
	}
	bm := &shareRaw{t: t, c: dialRaw(t, b.KafkaAddr), group: group, member: "member-b", topicID: td[topic].ID}
	bm.join(topic)
	got := bm.fetch(3000)
	if len(got) != 1 || got[0].FirstOffset != 2 || got[0].LastOffset != 2 || got[0].DeliveryCount != 2 {
		t.Fatalf("member b acquired %+v, want only offset 2 (released) with delivery count 2", got)
	}
}
