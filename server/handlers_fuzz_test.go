package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/protocol"
)

// FuzzHandlers sends arbitrary request frames, one per connection, to a
// running broker, end to end: decoding, dispatch and every handler. Each
// must be answered with its correlation id or have its connection closed,
// an answer must decode with kmsg as the response of the request's API and
// version, the broker must go on serving other clients, and its state must
// hold its invariants after every request (checkBrokerInvariants). The seeds are one
// request of every advertised API at its lowest and highest version, and
// at each the hostile requests of hostileRequests (arrays of 300 minimal
// elements, 300 unknown tags), so the plain test run sends each of those
// once; and share group requests with content (a member joining, fetching
// and acknowledging), since the broker has a group coordinator and serves
// them.
func FuzzHandlers(f *testing.F) {
	b := startBrokerWith(f, func(c *configs.Config) {
		// Low, so that fuzzed CreateTopics and CreatePartitions meet
		// the caps (checkBrokerInvariants checks the cluster's).
		c.MaxPartitionsPerRequest = 100
		c.MaxPartitions = fuzzMaxPartitions
	}, func(o *Options, meta *metastore.Node) {
		g, err := coordinator.New(coordinator.Config{BrokerID: o.Config.NodeID, Store: meta.Client(), Logger: zerolog.Nop()})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { g.Close() })
		o.Groups = g
	})
	fm := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	for _, key := range protocol.Keys() {
		r, _ := protocol.Versions(key)
		for _, v := range []int16{r.Min, r.Max} {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			f.Add(fm.AppendRequest(nil, req, 7)[4:])
			// And hostile ones: arrays of many minimal elements,
			// unknown tags (decode_budget.go).
			for _, h := range hostileRequests(key, v, 300) {
				f.Add(fm.AppendRequest(nil, h.req, 7)[4:])
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tp, err := b.meta.Client().CreateTopic(ctx, metastore.TopicSpec{Name: "shared", Partitions: 1, ReplicationFactor: 1})
	if err != nil {
		f.Fatal(err)
	}
	for _, req := range shareSeeds(tp.ID) {
		f.Add(fm.AppendRequest(nil, req, 7)[4:])
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) > 1<<20 {
			return
		}
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		// The frame, then an ApiVersions on the same connection: a
		// request that is never answered (acks=0) is then seen as the
		// ApiVersions answer coming first.
		const probe = int32(0x7eadbeef)
		out := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
		out = append(out, frame...)
		out = append(out, fm.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), probe)...)
		if _, err := nc.Write(out); err != nil {
			return // closed on us: allowed
		}
		br := bufio.NewReader(nc)
		resp, err := protocol.ReadFrame(br, nil, 1<<30)
		if err == nil && len(frame) >= 8 && len(resp) >= 4 {
			got, want := int32(binary.BigEndian.Uint32(resp)), int32(binary.BigEndian.Uint32(frame[4:]))
			if got != want && got != probe {
				t.Fatalf("answered correlation id %d to a request with %d", got, want)
			}
			if got == want && want != probe {
				key, version, _ := protocol.PeekHeader(frame)
				if err := decodeAnswer(key, version, resp[4:]); err != nil {
					t.Fatalf("answer to %s v%d (frame %x) does not decode: %v", apiName(key), version, frame[:min(len(frame), 64)], err)
				}
			}
		}
		// Whatever happened to that connection, another client is served.
		c := dialRaw(t, b.addr)
		c.nc.SetDeadline(time.Now().Add(5 * time.Second))
		c.send(kmsg.NewPtrApiVersionsRequest(), 1)
		if _, err := c.recv(kmsg.NewPtrApiVersionsResponse(), false); err != nil {
			t.Fatalf("broker stopped serving after frame %x: %v", frame[:min(len(frame), 64)], err)
		}
		if err := checkBrokerInvariants(b); err != nil {
			t.Fatalf("after frame %x: %v", frame[:min(len(frame), 64)], err)
		}
	})
}

const fuzzMaxPartitions = 300

// decodeAnswer decodes body, a response frame after its correlation id,
// as the response to API key at version: a version we do not serve is
// answered only for ApiVersions, in a v0 body (KIP-511).
func decodeAnswer(key, version int16, body []byte) error {
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		return fmt.Errorf("answered an unknown API key %d", key)
	}
	if key == protocol.ApiVersionsKey && !protocol.Supported(key, version) {
		version = 0
	}
	resp.SetVersion(version)
	if resp.IsFlexible() && key != protocol.ApiVersionsKey {
		if len(body) == 0 || body[0] != 0 {
			return errors.New("flexible response header without an empty tag section")
		}
		body = body[1:]
	}
	return resp.ReadFrom(body)
}

// checkBrokerInvariants checks what no request may break: the cluster
// holds at most max.partitions partitions, and every replica the broker
// hosts runs, with its log start <= high watermark <= log end.
func checkBrokerInvariants(b *testBroker) error {
	total := 0
	for _, tp := range b.srv.catalog.Topics() {
		if len(tp.Partitions) == 0 {
			return fmt.Errorf("topic %s has no partitions", tp.Name)
		}
		total += len(tp.Partitions)
	}
	if total > fuzzMaxPartitions {
		return fmt.Errorf("the cluster holds %d partitions, more than max.partitions (%d)", total, fuzzMaxPartitions)
	}
	for _, r := range b.srv.raft.Replicas() {
		if err := r.Failed(); err != nil {
			return fmt.Errorf("replica %s/%d failed: %v", r.Topic(), r.Key().Index, err)
		}
		start, hw, end := r.LogStartOffset(), r.HighWatermark(), r.LogEndOffset()
		if start > hw || hw > end {
			return fmt.Errorf("replica %s/%d: log start %d, high watermark %d, log end %d", r.Topic(), r.Key().Index, start, hw, end)
		}
	}
	return nil
}

// shareSeeds are share group requests with content for FuzzHandlers: a
// join, a session opened and fetched with acknowledgements (renew
// included), an acknowledgement, a describe and a share-partition
// FindCoordinator.
func shareSeeds(id metastore.TopicID) []kmsg.Request {
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, "sg", "m1", []string{"shared"}
	part := kmsg.NewShareFetchRequestTopicPartition()
	ack := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
	ack.FirstOffset, ack.LastOffset, ack.AcknowledgeTypes = 0, 2, []int8{1, 2, 4}
	part.AcknowledgementBatches = append(part.AcknowledgementBatches, ack)
	topic := kmsg.NewShareFetchRequestTopic()
	topic.TopicID = id
	topic.Partitions = append(topic.Partitions, part)
	open := kmsg.NewPtrShareFetchRequest()
	open.Version, open.GroupID, open.MemberID, open.MaxWaitMillis, open.MaxRecords = 2, kmsg.StringPtr("sg"), kmsg.StringPtr("m1"), 10, 5
	open.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
	next := kmsg.NewPtrShareFetchRequest()
	next.Version, next.GroupID, next.MemberID, next.ShareSessionEpoch, next.IsRenewAck = 2, kmsg.StringPtr("sg"), kmsg.StringPtr("m1"), 1, true
	next.Topics = []kmsg.ShareFetchRequestTopic{topic}
	sa := kmsg.NewPtrShareAcknowledgeRequest()
	sa.Version, sa.GroupID, sa.MemberID, sa.ShareSessionEpoch = 2, kmsg.StringPtr("sg"), kmsg.StringPtr("m1"), -1
	sap := kmsg.NewShareAcknowledgeRequestTopicPartition()
	sap.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{3}}}
	sa.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: id, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{sap}}}
	d := kmsg.NewPtrShareGroupDescribeRequest()
	d.Version, d.GroupIDs = 1, []string{"sg", "nope"}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 6, 2, []string{"sg:AAAAAAAAAAAAAAAAAAAAAA:0", "bad"}
	return []kmsg.Request{hb, open, next, sa, d, fc}
}
