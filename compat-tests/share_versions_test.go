package compat

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestShareAPIsEveryVersion drives each share group API at every version
// the broker advertises, with hand-built frames: a member joins
// (ShareGroupHeartbeat), opens a share session and acquires records
// (ShareFetch), accepts them (ShareAcknowledge), and a second fetch finds
// nothing left; each answer must decode at its version with nothing left
// over. Then the share-group offsets admin at its versions. The group starts at the earliest offset (its
// share.auto.offset.reset, a GROUP config).
func TestShareAPIsEveryVersion(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := harness.Context(t, 2*time.Minute)
	adm := newAdmin(t, b.KafkaAddr)
	const topic = "share-versions"
	createTopic(ctx, t, adm, topic, 1, nil)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	topicID := td[topic].ID
	c := dialRaw(t, b.KafkaAddr)
	adv := c.apiVersions()
	for _, k := range []int16{76, 77, 78, 79} {
		if _, ok := adv[k]; !ok {
			t.Fatalf("%s not advertised", kmsg.NameForKey(k))
		}
	}
	rt := func(req kmsg.Request, v int16) kmsg.Response {
		t.Helper()
		resp, err := c.roundTrip(req, v)
		if err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), v, err)
		}
		if re := resp.AppendTo(nil); len(re) != len(c.lastBody) {
			t.Fatalf("%s v%d: body %d bytes, re-encodes to %d", kmsg.NameForKey(req.Key()), v, len(c.lastBody), len(re))
		}
		return resp
	}
	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
	for fv := adv[78].MinVersion; fv <= min(adv[78].MaxVersion, kmsg.NewPtrShareFetchRequest().MaxVersion()); fv++ {
		group, member := "share-v"+strconv.Itoa(int(fv)), "member-"+strconv.Itoa(int(fv))
		ica := kmsg.NewPtrIncrementalAlterConfigsRequest()
		ica.Version = 1
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Value: kmsg.StringPtr("earliest")}}
		ica.Resources = append(ica.Resources, res)
		if r := rt(ica, 1).(*kmsg.IncrementalAlterConfigsResponse); r.Resources[0].ErrorCode != 0 {
			t.Fatalf("group config: %v", kerr.ErrorForCode(r.Resources[0].ErrorCode))
		}
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = adv[76].MaxVersion, group, member, []string{topic}
		hr := rt(hb, hb.Version).(*kmsg.ShareGroupHeartbeatResponse)
		if hr.ErrorCode != 0 || hr.Assignment == nil || len(hr.Assignment.TopicPartitions) != 1 {
			t.Fatalf("ShareGroupHeartbeat: %+v", hr)
		}
		d := kmsg.NewPtrShareGroupDescribeRequest()
		d.Version, d.GroupIDs = adv[77].MaxVersion, []string{group}
		if dr := rt(d, d.Version).(*kmsg.ShareGroupDescribeResponse); dr.Groups[0].ErrorCode != 0 || len(dr.Groups[0].Members) != 1 {
			t.Fatalf("ShareGroupDescribe: %+v", dr.Groups)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		fetch := func(epoch int32) *kmsg.ShareFetchResponse {
			f := kmsg.NewPtrShareFetchRequest()
			f.Version, f.GroupID, f.MemberID, f.ShareSessionEpoch = fv, kmsg.StringPtr(group), kmsg.StringPtr(member), epoch
			f.MaxWaitMillis, f.MaxBytes, f.MaxRecords, f.BatchSize = 2000, 1<<20, 100, 100
			f.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
			r := rt(f, fv).(*kmsg.ShareFetchResponse)
			if r.ErrorCode != 0 {
				t.Fatalf("ShareFetch v%d epoch %d: %v", fv, epoch, kerr.ErrorForCode(r.ErrorCode))
			}
			return r
		}
		r := fetch(0)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Fatalf("ShareFetch v%d: %+v", fv, r)
		}
		p := r.Topics[0].Partitions[0]
		var acquired int64
		for _, a := range p.AcquiredRecords {
			acquired += a.LastOffset - a.FirstOffset + 1
		}
		if p.ErrorCode != 0 || acquired < 2 || len(p.Records) == 0 {
			t.Fatalf("ShareFetch v%d acquired %d records (%+v)", fv, acquired, p)
		}
		if fv >= 1 && r.AcquisitionLockTimeoutMillis != 30000 {
			t.Errorf("ShareFetch v%d: AcquisitionLockTimeoutMs %d", fv, r.AcquisitionLockTimeoutMillis)
		}
		av := min(fv, adv[79].MaxVersion)
		sa := kmsg.NewPtrShareAcknowledgeRequest()
		sa.Version, sa.GroupID, sa.MemberID, sa.ShareSessionEpoch = av, kmsg.StringPtr(group), kmsg.StringPtr(member), 1
		part := kmsg.NewShareAcknowledgeRequestTopicPartition()
		for _, a := range p.AcquiredRecords {
			part.AcknowledgementBatches = append(part.AcknowledgementBatches, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
				FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, AcknowledgeTypes: []int8{1}})
		}
		sa.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{part}}}
		ar := rt(sa, av).(*kmsg.ShareAcknowledgeResponse)
		if ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("ShareAcknowledge v%d: %+v", av, ar)
		}
		// Accepted twice: INVALID_RECORD_STATE.
		sa.ShareSessionEpoch = 2
		if ar := rt(sa, av).(*kmsg.ShareAcknowledgeResponse); ar.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
			t.Fatalf("ShareAcknowledge v%d again: %+v", av, ar.Topics[0].Partitions[0])
		}
		start := time.Now()
		r = fetch(3)
		if ps := r.Topics[0].Partitions; len(ps) != 1 || len(ps[0].AcquiredRecords) != 0 {
			t.Fatalf("ShareFetch v%d after accepting everything: %+v", fv, ps)
		}
		if waited := time.Since(start); waited < time.Second {
			t.Errorf("ShareFetch v%d with nothing to acquire answered after %v, not its MaxWaitMs", fv, waited)
		}
		// A skipped epoch is refused.
		f := kmsg.NewPtrShareFetchRequest()
		f.Version, f.GroupID, f.MemberID, f.ShareSessionEpoch = fv, kmsg.StringPtr(group), kmsg.StringPtr(member), 9
		if r := rt(f, fv).(*kmsg.ShareFetchResponse); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
			t.Fatalf("ShareFetch v%d skipped epoch: %v", fv, kerr.ErrorForCode(r.ErrorCode))
		}
	}

	// The offsets admin: the last group above accepted every record.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	group := "share-v" + strconv.Itoa(int(min(adv[78].MaxVersion, kmsg.NewPtrShareFetchRequest().MaxVersion())))
	for _, k := range []int16{90, 91, 92} {
		if _, ok := adv[k]; !ok {
			t.Fatalf("%s not advertised", kmsg.NameForKey(k))
		}
	}
	for v := adv[90].MinVersion; v <= adv[90].MaxVersion; v++ {
		d := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		d.Version = v
		d.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: group}, {GroupID: group,
			Topics: []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: topic, Partitions: []int32{0}}, {Topic: "no-such-topic", Partitions: []int32{0}}}}}
		r := rt(d, v).(*kmsg.DescribeShareGroupOffsetsResponse)
		for i, g := range r.Groups {
			if g.ErrorCode != 0 || len(g.Topics) < 1 || g.Topics[0].Topic != topic || g.Topics[0].TopicID != topicID {
				t.Fatalf("DescribeShareGroupOffsets v%d group %d: %+v", v, i, g)
			}
			p := g.Topics[0].Partitions[0]
			if p.StartOffset != end.Offset || (v >= 1 && p.Lag != 0) || (v == 0 && p.Lag != -1) {
				t.Fatalf("DescribeShareGroupOffsets v%d group %d: %+v", v, i, p)
			}
		}
		if u := r.Groups[1].Topics[1]; u.TopicID != [16]byte{} || u.Partitions[0].StartOffset != -1 {
			t.Fatalf("DescribeShareGroupOffsets v%d unknown topic: %+v", v, u)
		}
	}
	a := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	if r := rt(a, 0).(*kmsg.AlterShareGroupOffsetsResponse); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("AlterShareGroupOffsets v0 without a group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID, del.Topics = "share-v-none", []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: topic}}
	if r := rt(del, 0).(*kmsg.DeleteShareGroupOffsetsResponse); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DeleteShareGroupOffsets v0 of a group that does not exist: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
