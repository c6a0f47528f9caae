package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/protocol"
)

func TestHandlersMatchVersionTable(t *testing.T) {
	for _, k := range protocol.Keys() {
		if _, ok := handlers[k]; !ok {
			t.Errorf("key %d (%s) is advertised but has no handler", k, apiName(k))
		}
	}
	for k := range handlers {
		if _, ok := protocol.Versions(k); !ok {
			t.Errorf("key %d (%s) has a handler but is not advertised", k, apiName(k))
		}
	}
}

func TestProduceConsumeRoundTrip(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) { c.LogFsync = "group" })
	cl := b.client(t, kgo.DefaultProduceTopic("rt"), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 500
	for i := 0; i < n; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("v%d", i)), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons := b.client(t, kgo.ConsumeTopics("rt"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != fmt.Sprint(got) || string(r.Value) != fmt.Sprintf("v%d", got) || r.Offset != int64(got) || len(r.Headers) != 1 {
				t.Fatalf("record %d: %+v", got, r)
			}
			got++
		})
	}
}

// rawConn sends hand-built requests.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) send(req kmsg.Request, corr int32) {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))
	if _, err := c.nc.Write(f.AppendRequest(nil, req, corr)); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one response frame; flexible says whether its header has tags.
func (c *rawConn) recv(resp kmsg.Response, flexibleHeader bool) (int32, error) {
	frame, err := protocol.ReadFrame(c.br, nil, 1<<30)
	if err != nil {
		return 0, err
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	body := frame[4:]
	if flexibleHeader {
		body = body[1:]
	}
	return corr, resp.ReadFrom(body)
}

func TestApiVersionsFallback(t *testing.T) {
	b := startBroker(t, nil)
	c := dialRaw(t, b.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 99
	// kmsg cannot encode v99, so encode v3 and patch the version field.
	req3 := kmsg.NewPtrApiVersionsRequest()
	req3.Version = 3
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, req3, 11)
	binary.BigEndian.PutUint16(frame[6:], 99)
	if _, err := c.nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	corr, err := c.recv(resp, false)
	if err != nil || corr != 11 {
		t.Fatalf("corr %d err %v", corr, err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
		t.Fatalf("want UNSUPPORTED_VERSION with the key list, got %+v", resp)
	}
	// The connection stays usable: now a real v3 request, whose response
	// header is still v0.
	c.send(req3, 12)
	resp = kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if corr, err := c.recv(resp, false); err != nil || corr != 12 || resp.ErrorCode != 0 {
		t.Fatalf("v3: corr %d err %v code %d", corr, err, resp.ErrorCode)
	}
}

func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	b := startBroker(t, nil)
	for name, payload := range map[string][]byte{
		"negative length":  {0xff, 0xff, 0xff, 0xff},
		"oversized length": binary.BigEndian.AppendUint32(nil, 200<<20),
		"unknown key":      append(binary.BigEndian.AppendUint32(nil, 10), 0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff),
		"produce v1":       append(binary.BigEndian.AppendUint32(nil, 10), 0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff),
		"truncated body":   append(binary.BigEndian.AppendUint32(nil, 10), 0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff),
	} {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, b.addr)
			if _, err := c.nc.Write(payload); err != nil {
				t.Fatal(err)
			}
			if _, err := c.br.ReadByte(); !errors.Is(err, io.EOF) {
				t.Fatalf("connection not closed: %v", err)
			}
			// Everyone else is still served.
			cl := b.client(t)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// produceRaw sends one Produce at the newest version (v13: topics by id)
// on a raw connection, so no client rewrites it.
func (b *testBroker) produceRaw(t *testing.T, topic string, acks int16, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = 13
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	if tp, ok := b.meta.Client().TopicByName(topic); ok {
		rt.TopicID = tp.ID
	}
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c := dialRaw(t, b.addr)
	c.send(req, 1)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = req.Version
	if _, err := c.recv(resp, true); err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

func TestProduceErrors(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) { c.AutoCreateTopics = false; c.MessageMaxBytes = 2000 })
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, 1
	ct.Topics = append(ct.Topics, rt)
	if resp, err := ct.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	good := makeTestBatch(3, 10)
	if sp := b.produceRaw(t, "t", -1, good); sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("good batch: %+v", sp)
	}
	bad := makeTestBatch(3, 10)
	bad[len(bad)-1] ^= 1
	big := makeTestBatch(1, 3000)
	for name, tc := range map[string]struct {
		topic string
		acks  int16
		recs  []byte
		want  *kerr.Error
	}{
		"bad crc":       {"t", 1, bad, kerr.CorruptMessage},
		"too large":     {"t", 1, big, kerr.MessageTooLarge},
		"unknown topic": {"nope", 1, good, kerr.UnknownTopicID},
		"acks 2":        {"t", 2, good, kerr.InvalidRequiredAcks},
		"two batches":   {"t", 1, append(append([]byte(nil), good...), good...), kerr.InvalidRecord},
	} {
		t.Run(name, func(t *testing.T) {
			sp := b.produceRaw(t, tc.topic, tc.acks, tc.recs)
			if sp.ErrorCode != tc.want.Code {
				t.Fatalf("error %d (%v), want %s", sp.ErrorCode, kerr.ErrorForCode(sp.ErrorCode), tc.want.Message)
			}
		})
	}
	// Nothing stored was lost: offset 0..2 still read back, and only them.
	if sp := b.produceRaw(t, "t", -1, makeTestBatch(1, 10)); sp.BaseOffset != 3 {
		t.Fatalf("next offset %d, want 3", sp.BaseOffset)
	}
}

func TestMinInsyncReplicasOnASingleReplica(t *testing.T) {
	b := startBroker(t, nil)
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "misr", 1, 1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "min.insync.replicas", kmsg.StringPtr("2")
	rt.Configs = append(rt.Configs, c)
	ct.Topics = append(ct.Topics, rt)
	if resp, err := ct.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	if sp := b.produceRaw(t, "misr", -1, makeTestBatch(1, 10)); sp.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with min.insync.replicas=2 on one replica: error %d, want NOT_ENOUGH_REPLICAS", sp.ErrorCode)
	}
	if sp := b.produceRaw(t, "misr", 1, makeTestBatch(1, 10)); sp.ErrorCode != 0 {
		t.Fatalf("acks=1 is not bound by min.insync.replicas: error %d", sp.ErrorCode)
	}
}
