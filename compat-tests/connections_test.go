package compat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestManyConnections: while one connection sits on half a frame (a slow or
// stuck client), 200 connections at once each negotiate versions, read
// Metadata and produce one record. All must be served promptly, and every
// record must land: one stuck or busy connection never blocks the others.
func TestManyConnections(t *testing.T) {
	const (
		topic = "many-conns"
		conns = 200
	)
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, topic, 4, nil)

	stuck := dialRaw(t, b.KafkaAddr)
	if err := stuck.write(sizePrefixed(1000, frameHeader(3, 1, 1))); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan string, conns)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if msg := oneConnection(t, b.KafkaAddr, topic, int32(i%4), i); msg != "" {
				errs <- msg
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	n := 0
	for msg := range errs {
		if n++; n <= 10 {
			t.Error(msg)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d connections failed", n, conns)
	}
	took := time.Since(start)
	t.Logf("%d connections served in %v", conns, took.Round(time.Millisecond))
	if took > 20*time.Second {
		t.Errorf("%d connections took %v", conns, took)
	}
	var total int64
	for _, e := range endOffsets(ctx, t, adm, topic) {
		total += e
	}
	if total != conns {
		t.Errorf("high watermarks add up to %d, want %d (one record per connection)", total, conns)
	}
	requireHealthy(t, b)
}

// oneConnection does ApiVersions, Metadata and one Produce on a new
// connection and returns what went wrong, if anything. It does not use
// rawConn so that it never calls t.Fatal off the test goroutine.
func oneConnection(t *testing.T, addr, topic string, partition int32, i int) string {
	c := &rawConn{t: t}
	var err error
	c.conn, err = dialTimeout(addr)
	if err != nil {
		return fmt.Sprintf("conn %d: dial: %v", i, err)
	}
	defer c.conn.Close()
	roundTrip := func(req kmsg.Request) (kmsg.Response, error) {
		c.corr++
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("sluice-compat-many")).AppendRequest(nil, req, c.corr)
		if err := c.write(frame); err != nil {
			return nil, err
		}
		body, err := c.readFrame(15 * time.Second)
		if err != nil {
			return nil, err
		}
		// Skip the correlation id and, for flexible non-ApiVersions
		// responses, one empty tag section.
		if len(body) < 4 || int32(uint32(body[0])<<24|uint32(body[1])<<16|uint32(body[2])<<8|uint32(body[3])) != c.corr {
			return nil, fmt.Errorf("bad correlation id")
		}
		body = body[4:]
		if req.IsFlexible() && req.Key() != 18 {
			body = body[1:]
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		return resp, resp.ReadFrom(body)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	if _, err := roundTrip(av); err != nil {
		return fmt.Sprintf("conn %d: ApiVersions: %v", i, err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, rt)
	resp, err := roundTrip(md)
	if err != nil {
		return fmt.Sprintf("conn %d: Metadata v9: %v", i, err)
	}
	if m := resp.(*kmsg.MetadataResponse); len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 {
		return fmt.Sprintf("conn %d: Metadata v9: %+v", i, m.Topics)
	}
	pr := kmsg.NewPtrProduceRequest()
	pr.Version = 9
	pr.Acks = -1
	pr.TimeoutMillis = 10_000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = partition
	pp.Records = recordBatch(fmt.Sprintf("conn-%d", i))
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	resp, err = roundTrip(pr)
	if err != nil {
		return fmt.Sprintf("conn %d: Produce v9: %v", i, err)
	}
	if p := resp.(*kmsg.ProduceResponse); len(p.Topics) != 1 || len(p.Topics[0].Partitions) != 1 || p.Topics[0].Partitions[0].ErrorCode != 0 {
		return fmt.Sprintf("conn %d: Produce v9: %+v", i, p.Topics)
	}
	return ""
}
