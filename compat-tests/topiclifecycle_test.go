package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicLifecycle: delete a topic with data and create it again under the
// same name (a new topic id, an empty log: no old record comes back, offsets
// start at 0), then add partitions and produce to the new one.
func TestTopicLifecycle(t *testing.T) {
	t.Parallel()
	const topic = "lifecycle"
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, topic, 2, nil)

	produce := func(p int32, values ...string) {
		t.Helper()
		cl := newClient(t, b.KafkaAddr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		defer cl.Close()
		var rs []*kgo.Record
		for _, v := range values {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce to %s/%d: %v", topic, p, err)
		}
	}
	topicID := func() string {
		t.Helper()
		tp := freshTopics(ctx, t, b.KafkaAddr, topic)[topic]
		if tp.ErrorCode != 0 {
			t.Fatalf("Metadata %q: error %d", topic, tp.ErrorCode)
		}
		return fmt.Sprint(tp.TopicID)
	}

	produce(0, "old-0", "old-1", "old-2")
	produce(1, "old-3")
	oldID := topicID()

	dr, err := adm.DeleteTopics(ctx, topic)
	if err != nil || dr[topic].Err != nil {
		t.Fatalf("DeleteTopics: %v %v", err, dr[topic].Err)
	}
	// Deletion may finish asynchronously (Kafka returns once the metadata
	// change is committed); creating the same name again must work soon after.
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := adm.CreateTopics(ctx, 1, 1, nil, topic)
		if err != nil {
			t.Fatalf("CreateTopics after delete: %v", err)
		}
		if resp[topic].Err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CreateTopics %q 20s after deleting it: %v (%s)", topic, resp[topic].Err, resp[topic].ErrMessage)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if newID := topicID(); newID == oldID {
		t.Errorf("the re-created topic kept the old topic id %s", oldID)
	}
	adm = newAdmin(t, b.KafkaAddr) // kadm finds partitions through a metadata cache
	ends := endOffsets(ctx, t, adm, topic)
	if len(ends) != 1 || ends[0] != 0 {
		t.Errorf("re-created topic: end offsets %v, want {0: 0} (one empty partition)", ends)
	}
	produce(0, "new-0")
	got := consumeAll(ctx, t, b.KafkaAddr, topic, endOffsets(ctx, t, adm, topic))
	if len(got[0]) != 1 || string(got[0][0].Value) != "new-0" || got[0][0].Offset != 0 {
		var vs []string
		for _, r := range got[0] {
			vs = append(vs, fmt.Sprintf("%d:%s", r.Offset, r.Value))
		}
		t.Errorf("re-created topic holds %v, want [0:new-0]", vs)
	}

	// Grow to 3 partitions; the new ones take writes at once.
	cp, err := adm.UpdatePartitions(ctx, 3, topic)
	if err != nil || cp[topic].Err != nil {
		t.Fatalf("CreatePartitions to 3: %v %v", err, cp[topic].Err)
	}
	produce(2, "grown-0", "grown-1")
	ends = endOffsets(ctx, t, newAdmin(t, b.KafkaAddr), topic)
	if len(ends) != 3 || ends[2] != 2 {
		t.Errorf("after adding partitions and producing 2 records to partition 2: end offsets %v", ends)
	}
}
