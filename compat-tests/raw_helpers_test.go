package compat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn speaks the Kafka wire protocol by hand, for requests no client
// would send.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	corr int32
	// lastBody is the body (after the response header) of the last response
	// roundTrip read.
	lastBody []byte
}

func dialTimeout(addr string) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, 5*time.Second)
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := dialTimeout(addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, conn: c}
}

func (c *rawConn) write(b []byte) error {
	c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := c.conn.Write(b)
	return err
}

// send writes req with a fresh correlation id and returns that id.
func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("sluice-compat-raw")).AppendRequest(nil, req, c.corr)
	if err := c.write(frame); err != nil {
		c.t.Fatalf("write %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return c.corr
}

// readFrame reads one size-prefixed frame.
func (c *rawConn) readFrame(timeout time.Duration) ([]byte, error) {
	c.conn.SetReadDeadline(time.Now().Add(timeout))
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("response frame size %d", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.conn, body); err != nil {
		return nil, fmt.Errorf("reading %d-byte response: %w", n, err)
	}
	return body, nil
}

// roundTrip sends req and decodes the response at respVersion (normally the
// request's version). ApiVersions responses always use response header v0;
// other flexible responses use v1 (with tagged fields).
func (c *rawConn) roundTrip(req kmsg.Request, respVersion int16) (kmsg.Response, error) {
	c.t.Helper()
	corr := c.send(req)
	body, err := c.readFrame(15 * time.Second)
	if err != nil {
		return nil, fmt.Errorf("%s v%d: no response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	rd := kbin.Reader{Src: body}
	if got := rd.Int32(); got != corr {
		return nil, fmt.Errorf("%s v%d: response correlation id %d, want %d", kmsg.NameForKey(req.Key()), req.GetVersion(), got, corr)
	}
	if req.IsFlexible() && req.Key() != 18 {
		for n := rd.Uvarint(); n > 0; n-- { // response header tagged fields
			rd.Uvarint()
			rd.Span(int(rd.Uvarint()))
		}
	}
	if !rd.Ok() {
		return nil, fmt.Errorf("%s v%d: truncated response header (% x)", kmsg.NameForKey(req.Key()), req.GetVersion(), trunc(body, 64))
	}
	c.lastBody = rd.Src
	resp := req.ResponseKind()
	resp.SetVersion(respVersion)
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("%s v%d: decoding response body as v%d: %w (body % x)", kmsg.NameForKey(req.Key()), req.GetVersion(), respVersion, err, trunc(rd.Src, 64))
	}
	return resp, nil
}

func trunc(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// expectClosed asserts that the broker closes the connection (EOF or reset)
// within d without sending anything.
func (c *rawConn) expectClosed(d time.Duration) {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 512)
	n, err := c.conn.Read(buf)
	switch {
	case n > 0:
		c.t.Errorf("broker answered %d bytes (% x) instead of closing the connection", n, trunc(buf[:n], 32))
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		// closed: good
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.t.Errorf("broker kept the connection open for %v (Kafka closes it)", d)
	default:
		c.t.Errorf("reading after a bad frame: %v (want EOF)", err)
	}
}

// apiVersions asks the broker for its version table on this connection.
func (c *rawConn) apiVersions() map[int16]kmsg.ApiVersionsResponseApiKey {
	c.t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = "sluice-compat"
	req.ClientSoftwareVersion = "0.1"
	resp, err := c.roundTrip(req, 3)
	if err != nil {
		c.t.Fatalf("ApiVersions v3: %v", err)
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if r.ErrorCode != 0 {
		c.t.Fatalf("ApiVersions v3: error code %d", r.ErrorCode)
	}
	out := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, k := range r.ApiKeys {
		out[k.ApiKey] = k
	}
	return out
}

// pickVersion returns the highest version of key both the broker and we
// (at most ourMax) support.
func pickVersion(t *testing.T, versions map[int16]kmsg.ApiVersionsResponseApiKey, key, ourMax int16) int16 {
	t.Helper()
	k, ok := versions[key]
	if !ok {
		t.Fatalf("broker does not advertise %s (key %d)", kmsg.NameForKey(key), key)
	}
	v := min(k.MaxVersion, ourMax)
	if v < k.MinVersion {
		t.Fatalf("broker advertises %s v%d-v%d; we need a version <= %d", kmsg.NameForKey(key), k.MinVersion, k.MaxVersion, ourMax)
	}
	return v
}

// recordBatch encodes a magic-v2 record batch (no compression, no producer
// id) holding one record per value, with a correct CRC32C.
func recordBatch(values ...string) []byte {
	return idempotentBatch(-1, -1, -1, values...)
}

// idempotentBatch is recordBatch with producer id, epoch and first sequence.
func idempotentBatch(producerID int64, epoch int16, firstSeq int32, values ...string) []byte {
	return buildBatch(producerID, epoch, firstSeq, time.Now().UnixMilli(), values...)
}

// recordBatchAt is recordBatch with every record's timestamp set to tsMillis.
func recordBatchAt(tsMillis int64, values ...string) []byte {
	return buildBatch(-1, -1, -1, tsMillis, values...)
}

func buildBatch(producerID int64, epoch int16, firstSeq int32, now int64, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		var body []byte
		body = append(body, 0)                        // attributes
		body = kbin.AppendVarlong(body, 0)            // timestamp delta
		body = kbin.AppendVarint(body, int32(i))      // offset delta
		body = kbin.AppendVarint(body, -1)            // null key
		body = kbin.AppendVarint(body, int32(len(v))) // value
		body = append(body, v...)
		body = kbin.AppendVarint(body, 0) // no headers
		recs = kbin.AppendVarint(recs, int32(len(body)))
		recs = append(recs, body...)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(len(values) - 1),
		FirstTimestamp:       now,
		MaxTimestamp:         now,
		ProducerID:           producerID,
		ProducerEpoch:        epoch,
		FirstSequence:        firstSeq,
		NumRecords:           int32(len(values)),
		Records:              recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:12], uint32(len(raw)-12))
	crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(raw[17:21], crc)
	return raw
}

// produceRaw sends one Produce (acks=-1) of batch to topic/partition at
// version v and returns the partition's answer.
func produceRaw(t *testing.T, c *rawConn, v int16, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = v
	req.Acks = -1
	req.TimeoutMillis = 10_000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = partition
	pp.Records = batch
	tp.Partitions = append(tp.Partitions, pp)
	req.Topics = append(req.Topics, tp)
	resp, err := c.roundTrip(req, v)
	if err != nil {
		t.Fatalf("Produce: %v", err)
	}
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("Produce v%d: response has %d topics (want 1 topic with 1 partition): %+v", v, len(r.Topics), r.Topics)
	}
	if r.Topics[0].Topic != topic || r.Topics[0].Partitions[0].Partition != partition {
		t.Errorf("Produce v%d: response names %s/%d, want %s/%d", v, r.Topics[0].Topic, r.Topics[0].Partitions[0].Partition, topic, partition)
	}
	return r.Topics[0].Partitions[0]
}
