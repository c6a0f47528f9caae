package server

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A large Produce request is handled as it arrives: its first partition's
// batch is in the log (acks=all: committed, so its end offset moved)
// while the rest of the request has not been sent yet; the answer, once
// it all arrives, acknowledges both partitions, and both read back.
func TestProduceStreamWritesBatchesAsTheyArrive(t *testing.T) {
	b := startBroker(t, nil)
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "stream"); err != nil {
		t.Fatal(err)
	}
	batches := [][]byte{makeTestBatch(200, 1000), makeTestBatch(300, 1000)} // ~200 and ~300 KB
	for _, version := range []int16{8, 11} {
		req := streamTestRequest(version, -1, batches)
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, 7)
		// Everything up to the middle of the second batch.
		cut := bytes.Index(frame, batches[1]) + len(batches[1])/2
		if cut < len(batches[0]) {
			t.Fatal("second batch not found in the frame")
		}
		before, err := adm.ListEndOffsets(ctx, "stream")
		if err != nil {
			t.Fatal(err)
		}
		start0, _ := before.Lookup("stream", 0)
		start1, _ := before.Lookup("stream", 1)
		c := dialRaw(t, b.addr)
		c.nc.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.nc.Write(frame[:cut]); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			ends, err := adm.ListEndOffsets(ctx, "stream")
			if err != nil {
				t.Fatal(err)
			}
			e0, _ := ends.Lookup("stream", 0)
			e1, _ := ends.Lookup("stream", 1)
			if e1.Offset != start1.Offset {
				t.Fatalf("v%d: partition 1 moved to %d before its batch arrived", version, e1.Offset)
			}
			if e0.Offset == start0.Offset+200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("v%d: partition 0's batch not written while the request is still arriving (end offset %d)", version, e0.Offset)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := c.nc.Write(frame[cut:]); err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = version
		if corr, err := c.recv(resp, version >= 9); err != nil || corr != 7 {
			t.Fatalf("v%d: response: corr %d, %v", version, corr, err)
		}
		for p, sp := range resp.Topics[0].Partitions {
			want := start0.Offset
			if p == 1 {
				want = start1.Offset
			}
			if sp.ErrorCode != 0 || sp.BaseOffset != want {
				t.Fatalf("v%d: partition %d answered %+v, want base offset %d", version, p, sp, want)
			}
		}
		ends, err := adm.ListEndOffsets(ctx, "stream")
		if err != nil {
			t.Fatal(err)
		}
		if e1, _ := ends.Lookup("stream", 1); e1.Offset != start1.Offset+300 {
			t.Fatalf("v%d: partition 1 ends at %d", version, e1.Offset)
		}
	}

	// acks=0 is read whole (its large batches in buffers of their own)
	// and handled once it has all arrived.
	req := streamTestRequest(9, 0, batches)
	before, err := adm.ListEndOffsets(ctx, "stream")
	if err != nil {
		t.Fatal(err)
	}
	dialRaw(t, b.addr).send(req, 8)
	for p, n := range []int64{200, 300} {
		for {
			ends, err := adm.ListEndOffsets(ctx, "stream")
			if err != nil {
				t.Fatal(err)
			}
			s0, _ := before.Lookup("stream", int32(p))
			if e, _ := ends.Lookup("stream", int32(p)); e.Offset == s0.Offset+n {
				break
			} else if ctx.Err() != nil {
				t.Fatalf("acks=0: partition %d ends at %d", p, e.Offset)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	b.requestBytesIdle(t)
}

// streamTestRequest is a Produce request to topic "stream" with one
// partition per batch, partition i holding batches[i].
func streamTestRequest(version, acks int16, batches [][]byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, acks, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "stream"
	for p, recs := range batches {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(p), recs
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}
