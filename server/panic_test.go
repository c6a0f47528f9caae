package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHandlerPanicClosesOnlyItsConnection makes two handlers panic, one in
// its first stage and one in a second stage (rc.later), on a running
// broker: each closes the connection that sent the request, pipelined
// requests before it answered, is counted by API, and every other client,
// a franz-go one among them, goes on being served. Without the recovery
// the first panic ends the test binary.
func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	const first, second = int16(16), int16(15) // ListGroups, DescribeGroups
	saved := map[int16]handler{first: handlers[first], second: handlers[second]}
	handlers[first] = func(*Server, *reqCtx, kmsg.Request) (kmsg.Response, error) {
		panic("first stage fault")
	}
	handlers[second] = func(_ *Server, rc *reqCtx, _ kmsg.Request) (kmsg.Response, error) {
		rc.later(func() kmsg.Response {
			var m map[string]int
			m["x"] = 1 // a nil map write: a runtime panic
			return nil
		})
		return nil, nil
	}
	t.Cleanup(func() { // after the broker has closed (cleanups run last first)
		for k, h := range saved {
			handlers[k] = h
		}
	})
	b := startBroker(t, nil)

	// A bystander connection opened before the faults.
	bystander := dialRaw(t, b.addr)
	bystander.send(kmsg.NewPtrApiVersionsRequest(), 1)
	if _, err := bystander.recv(kmsg.NewPtrApiVersionsResponse(), false); err != nil {
		t.Fatal(err)
	}

	for i, key := range []int16{first, second} {
		c := dialRaw(t, b.addr)
		// An ApiVersions pipelined before the faulting request is
		// answered; then the connection closes, without waiting for a
		// deadline.
		c.send(kmsg.NewPtrApiVersionsRequest(), 10)
		req := kmsg.RequestForKey(key)
		req.SetVersion(0)
		c.send(req, 11)
		if corr, err := c.recv(kmsg.NewPtrApiVersionsResponse(), false); err != nil || corr != 10 {
			t.Fatalf("%s: pipelined ApiVersions: corr %d, %v", apiName(key), corr, err)
		}
		start := time.Now()
		_, err := c.recv(kmsg.NewPtrApiVersionsResponse(), false)
		var ne net.Error
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("%s: connection not closed after its handler panicked: %v (after %v)", apiName(key), err, time.Since(start))
		}
		if got := counterValue(b.srv.metrics.panics.WithLabelValues(apiName(key))); got != 1 {
			t.Fatalf("%s: sluice_request_panics_total = %v, want 1 (%d)", apiName(key), got, i)
		}
	}

	// The bystander and a new franz-go client are served.
	bystander.send(kmsg.NewPtrApiVersionsRequest(), 2)
	if corr, err := bystander.recv(kmsg.NewPtrApiVersionsResponse(), false); err != nil || corr != 2 {
		t.Fatalf("bystander: corr %d, %v", corr, err)
	}
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatalf("metadata after the panics: %v", err)
	}
}

// TestPartitionWorkPanicAnswersUnknownServerError injects panics into the
// work a Produce and a DeleteRecords do for single partitions (in the
// handler's first stage, in its second stage, and in the goroutine
// DeleteRecords starts per partition): each is answered
// UNKNOWN_SERVER_ERROR for that partition alone, the request's other
// partitions are served, the connection stays open, and every panic is
// counted under its API. A franz-go producer gets the error for the
// faulted partition and its records to the others are written. Without
// the recovery the panics in the second stage's goroutines end the test
// binary.
func TestPartitionWorkPanicAnswersUnknownServerError(t *testing.T) {
	var armed atomic.Bool
	partitionFault = func(api int16, stage, topic string, p int32) {
		if !armed.Load() || topic != "pp" {
			return
		}
		switch {
		case api == 0 && stage == "stage1" && p == 1,
			api == 0 && stage == "stage2" && p == 2,
			api == 21 && p == 1:
			panic(fmt.Sprintf("injected fault: %d %s %d", api, stage, p))
		}
	}
	t.Cleanup(func() { partitionFault = nil })
	b := startBroker(t, nil)
	cl := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(2))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ct, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "pp")
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)

	// One Produce (acks=all) to all three partitions on one connection.
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "pp", ct.ID
	for p := range int32(3) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, makeTestBatch(2, 10)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	br := cl.Broker(int(b.srv.cfg.NodeID))
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	want := map[int32]int16{0: 0, 1: kerr.UnknownServerError.Code, 2: kerr.UnknownServerError.Code}
	for _, sp := range resp.Topics[0].Partitions {
		if sp.ErrorCode != want[sp.Partition] {
			t.Errorf("produce partition %d: code %d, want %d", sp.Partition, sp.ErrorCode, want[sp.Partition])
		}
		if sp.ErrorCode != 0 && (sp.BaseOffset != -1 || sp.ErrorMessage == nil) {
			t.Errorf("produce partition %d: base offset %d, message %v", sp.Partition, sp.BaseOffset, sp.ErrorMessage)
		}
	}
	if got := counterValue(b.srv.metrics.panics.WithLabelValues("Produce")); got != 2 {
		t.Fatalf("Produce panics counted: %v, want 2", got)
	}

	// The franz-go producer: partition 1 fails with the error, 0 is
	// written (after the first request's two records).
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: "pp", Partition: 0, Value: []byte("a")}, &kgo.Record{Topic: "pp", Partition: 1, Value: []byte("b")})
	for _, r := range res {
		switch r.Record.Partition {
		case 0:
			if r.Err != nil || r.Record.Offset != 2 {
				t.Errorf("franz-go partition 0: offset %d, %v", r.Record.Offset, r.Err)
			}
		case 1:
			if !errors.Is(r.Err, kerr.UnknownServerError) {
				t.Errorf("franz-go partition 1: %v, want UNKNOWN_SERVER_ERROR", r.Err)
			}
		}
	}

	// DeleteRecords: partition 1's goroutine panics, 0 and 2 are served.
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.TimeoutMillis = 10000
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "pp"
	for p := range int32(3) {
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = p, -1
		drt.Partitions = append(drt.Partitions, rp)
	}
	dr.Topics = append(dr.Topics, drt)
	dresp, err := dr.RequestWith(ctx, br)
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	for _, sp := range dresp.Topics[0].Partitions {
		code, low := int16(0), int64(3)
		switch sp.Partition {
		case 1:
			code, low = kerr.UnknownServerError.Code, -1
		case 2:
			// Its stage-2 panic came after the proposal: the two
			// records were written, only the answer was lost, as
			// after any error past the append.
			low = 2
		}
		if sp.ErrorCode != code || sp.LowWatermark != low {
			t.Errorf("delete records partition %d: code %d low %d, want %d %d", sp.Partition, sp.ErrorCode, sp.LowWatermark, code, low)
		}
	}
	if got := counterValue(b.srv.metrics.panics.WithLabelValues("DeleteRecords")); got != 1 {
		t.Fatalf("DeleteRecords panics counted: %v, want 1", got)
	}

	// Disarmed, the same connection serves partition 1 and 2 again.
	armed.Store(false)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "pp", Partition: 1, Value: []byte("c")}, &kgo.Record{Topic: "pp", Partition: 2, Value: []byte("d")}).FirstErr(); err != nil {
		t.Fatalf("produce after the faults: %v", err)
	}
}

// TestThrottledAnswerPanicClosesOnlyItsConnection: a panic in the
// goroutine that holds back a throttled response for a client too old to
// throttle itself (Metadata v4 past a request_percentage quota) is
// contained as a handler's is: counted under the request's API, the
// connection that sent it closed, and other clients served. Without the
// recovery the panic ends the test binary.
func TestThrottledAnswerPanicClosesOnlyItsConnection(t *testing.T) {
	var faulted atomic.Int32
	throttleFault = func(api int16) {
		if api == 3 { // Metadata
			faulted.Add(1)
			panic("throttled answer fault")
		}
	}
	t.Cleanup(func() { throttleFault = nil }) // after the broker has closed
	b, admin := quotaBroker(t)
	alterQuota(t, admin, []quotaEnt{{"client-id", "raw"}}, "request_percentage", 0.0001)

	c := dialRaw(t, b.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 4 // before v6 the broker holds the response back itself
	c.send(req, 1)
	start := time.Now()
	_, err := c.recv(kmsg.NewPtrMetadataResponse(), false)
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("connection not closed after its throttled answer panicked: %v (after %v)", err, time.Since(start))
	}
	if faulted.Load() != 1 {
		t.Fatalf("the throttled answer's goroutine ran the fault %d times, want 1: the test did not reach it", faulted.Load())
	}
	if got := counterValue(b.srv.metrics.panics.WithLabelValues("Metadata")); got != 1 {
		t.Fatalf("sluice_request_panics_total{api=Metadata} = %v, want 1", got)
	}
	// Another client is served.
	cl := b.client(t, kgo.ClientID("free"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatalf("metadata after the panic: %v", err)
	}
}
