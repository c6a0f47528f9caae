package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/protocol"
)

// TestDecodeBoundHostileFrames decodes, for every advertised API at every
// version, the request with no fields set and hostile ones (each array of
// the request and of its elements filled with 2,048 minimal elements, and
// 2,048 unknown tags) and checks that what decoding allocated is within
// the bound conn.handle reserves before decoding, that what decodedSize
// then keeps charged is within it too and counts most of what the request
// holds, and that Produce's bound, walked from the frame, is close to its
// decoded size. Under the race detector, which allocates differently, the
// allocations are only logged.
func TestDecodeBoundHostileFrames(t *testing.T) {
	cases, worst := 0, 0.0
	var worstName string
	for _, key := range protocol.Keys() {
		r, _ := protocol.Versions(key)
		for v := r.Min; v <= r.Max; v++ {
			empty := kmsg.RequestForKey(key)
			empty.SetVersion(v)
			reqs := append([]hostileRequest{{fmt.Sprintf("%T v%d with no field set", empty, v), empty}}, hostileRequests(key, v, 2048)...)
			for _, h := range reqs {
				body := h.req.AppendTo(nil)
				bound, exact := decodeBound(key, v, body)
				// TotalAlloc counts every goroutine's allocations: the
				// least of three decodes is this one's.
				var got kmsg.Request
				alloc := int64(-1)
				for range 3 {
					got = kmsg.RequestForKey(key)
					got.SetVersion(v)
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					err := got.ReadFrom(body)
					runtime.ReadMemStats(&after)
					if err != nil {
						t.Fatalf("%s: %d bytes do not decode: %v", h.name, len(body), err)
					}
					if a := int64(after.TotalAlloc - before.TotalAlloc); alloc < 0 || a < alloc {
						alloc = a
					}
				}
				cases++
				size := decodedSize(got)
				if alloc > bound && !raceEnabled {
					t.Errorf("%s: %d bytes allocated %d decoding, over the bound %d", h.name, len(body), alloc, bound)
				}
				if size > bound {
					t.Errorf("%s: decoded size %d over the bound %d", h.name, size, bound)
				}
				if key == 0 && !exact {
					t.Errorf("%s: kmsg decodes it, but the Produce walk refused it", h.name)
				}
				if exact && bound > 2*size+decodeBase {
					t.Errorf("%s: Produce walked to %d, decoded to %d", h.name, bound, size)
				}
				if len(body) > 4096 {
					if k := float64(alloc) / float64(len(body)); k > worst {
						worst, worstName = k, h.name
					}
					// Counted: most of what decoding allocated (a map's
					// growth leaves garbage behind, counted as garbage).
					if size < alloc/3 && !raceEnabled {
						t.Errorf("%s: decoded size %d, but decoding allocated %d", h.name, size, alloc)
					}
				}
			}
		}
	}
	t.Logf("%d requests; most allocated per byte: %.1f, by %s (decodeFactor %d)", cases, worst, worstName, decodeFactor)
}

// TestProduceDecodedSizeRefusesBadFrames: the Produce walk says ok only for
// a frame kmsg decodes.
func TestProduceDecodedSizeRefusesBadFrames(t *testing.T) {
	for v := int16(3); v <= 13; v++ {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		id := "tx"
		req.TransactionID = &id
		for i := range 3 {
			tp := kmsg.NewProduceRequestTopic()
			tp.Topic = strings.Repeat("t", i+1)
			for j := range i + 1 {
				pp := kmsg.NewProduceRequestTopicPartition()
				pp.Partition = int32(j)
				pp.Records = []byte("records")
				tp.Partitions = append(tp.Partitions, pp)
			}
			req.Topics = append(req.Topics, tp)
		}
		body := req.AppendTo(nil)
		for cut := range len(body) {
			_, ok := produceDecodedSize(v, body[:cut])
			got := kmsg.NewPtrProduceRequest()
			got.SetVersion(v)
			if ok && got.ReadFrom(body[:cut]) != nil {
				t.Fatalf("v%d: walk accepted %d of %d bytes that kmsg refuses", v, cut, len(body))
			}
		}
		n, ok := produceDecodedSize(v, body)
		got := kmsg.NewPtrProduceRequest()
		got.SetVersion(v)
		if !ok || got.ReadFrom(body) != nil || n < decodedSize(got) {
			t.Fatalf("v%d: walk %d %v, decoded %d", v, n, ok, decodedSize(got))
		}
	}
}

// TestHostileDecodeOnABroker sends hostile frames to a running broker with
// queued.max.request.bytes at 8 MiB: a Metadata v1 request of 200,000 empty
// topic names (400 KB, whose decoding is bounded at 38 MB, past the
// budget) closes its connection undecoded while another client is served;
// one of 30,000 names (60 KB, bounded at 5.8 MB) is answered; a 900 KB Produce, whose
// walk finds it holds nearly nothing beyond its records, is taken; and
// every byte of the budget comes back.
func TestHostileDecodeOnABroker(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) {
		c.QueuedMaxRequestBytes = 8 << 20
		c.AutoCreateTopics = true
	})
	fm := kmsg.NewRequestFormatter(kmsg.FormatterClientID("hostile"))
	metadata := func(n int) []byte {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(1)
		for range n {
			req.Topics = append(req.Topics, kmsg.NewMetadataRequestTopic())
		}
		for i := range req.Topics {
			req.Topics[i].Topic = kmsg.StringPtr("")
		}
		return fm.AppendRequest(nil, req, 42)
	}
	send := func(frame []byte) ([]byte, error) {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := nc.Write(frame); err != nil {
			return nil, err
		}
		return protocol.ReadFrame(bufio.NewReader(nc), nil, 1<<30)
	}
	served := func() {
		t.Helper()
		c := dialRaw(t, b.addr)
		c.nc.SetDeadline(time.Now().Add(5 * time.Second))
		c.send(kmsg.NewPtrApiVersionsRequest(), 1)
		if _, err := c.recv(kmsg.NewPtrApiVersionsResponse(), false); err != nil {
			t.Fatalf("broker not serving: %v", err)
		}
	}

	if resp, err := send(metadata(200_000)); err == nil {
		t.Fatalf("a request decoding past the bound was answered (%d bytes)", len(resp))
	}
	served()
	resp, err := send(metadata(30_000))
	if err != nil {
		t.Fatalf("a hostile request within the bound: %v", err)
	}
	if corr := int32(binary.BigEndian.Uint32(resp)); corr != 42 {
		t.Fatalf("answered correlation id %d", corr)
	}
	served()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := b.client(t, kgo.DefaultProduceTopic("hostile"), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchMaxBytes(1<<20))
	big := make([]byte, 900<<10)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: big}).FirstErr(); err != nil {
		t.Fatalf("a 900 KB produce with the bound at 8 MiB: %v", err)
	}
	b.requestBytesIdle(t)
}
