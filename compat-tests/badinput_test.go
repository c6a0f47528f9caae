package compat

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// requireHealthy checks that the broker process is alive and that a brand-new
// connection is served: ApiVersions by hand, then a kgo client's Metadata.
func requireHealthy(t *testing.T, b *harness.Broker) {
	t.Helper()
	b.RequireRunning(t)
	c := dialRaw(t, b.KafkaAddr)
	c.apiVersions()
	cl := newClient(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("broker no longer serves a new client: ping: %v", err)
	}
	cl.Close()
}

// frameHeader encodes a request header (v1: key, version, correlation id,
// client id) with no size prefix.
func frameHeader(key, version int16, corr int32) []byte {
	h := kbin.AppendInt16(nil, key)
	h = kbin.AppendInt16(h, version)
	h = kbin.AppendInt32(h, corr)
	id := "sluice-compat-raw"
	return kbin.AppendNullableString(h, &id)
}

func sizePrefixed(size int32, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(size)), body...)
}

// TestBadInput sends malformed or unusual frames by hand. Each must be
// answered the way Kafka answers it (a precise error code, or closing that
// one connection), and the broker must go on serving new connections.
func TestBadInput(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	requireHealthy(t, b)
	// A case that crashes the broker fails (the harness reports the crash and
	// its stderr); restart it so that the remaining cases still say something.
	run := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) && b.Exited(time.Second) {
			b.Restart()
		}
	}

	run("NegativeLength", func(t *testing.T) {
		// Kafka: InvalidReceiveException ("Invalid receive (size = -1)"), connection closed.
		c := dialRaw(t, b.KafkaAddr)
		if err := c.write(sizePrefixed(-1, frameHeader(18, 0, 1))); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(5 * time.Second)
		requireHealthy(t, b)
	})

	run("LengthOver100MiB", func(t *testing.T) {
		// Kafka checks the size against socket.request.max.bytes (100 MiB) before
		// reading or allocating the body, and closes the connection.
		c := dialRaw(t, b.KafkaAddr)
		body := append(frameHeader(18, 0, 1), make([]byte, 1024)...)
		if err := c.write(sizePrefixed(100<<20+1, body)); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(5 * time.Second)
		requireHealthy(t, b)
	})

	run("TruncatedThenClose", func(t *testing.T) {
		c := dialRaw(t, b.KafkaAddr)
		full := kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrMetadataRequest(), 1)
		if err := c.write(full[:len(full)/2]); err != nil {
			t.Fatal(err)
		}
		c.conn.Close()
		// A frame that promises more bytes than ever come, on a live connection:
		// the broker waits; it must not answer a partial request.
		c2 := dialRaw(t, b.KafkaAddr)
		if err := c2.write(sizePrefixed(64, frameHeader(18, 3, 7))); err != nil {
			t.Fatal(err)
		}
		if body, err := c2.readFrame(time.Second); err == nil {
			t.Errorf("broker answered a request of which only part arrived: % x", trunc(body, 32))
		}
		c2.conn.Close()
		requireHealthy(t, b)
	})

	run("UnknownAPIKey", func(t *testing.T) {
		// Kafka: RequestHeader.parse fails on an unknown key (InvalidRequestException)
		// and the processor closes the connection without an answer.
		c := dialRaw(t, b.KafkaAddr)
		if err := c.write(sizePrefixed(int32(len(frameHeader(9999, 0, 1))), frameHeader(9999, 0, 1))); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(5 * time.Second)
		requireHealthy(t, b)
	})

	run("UnsupportedApiVersionsVersion", func(t *testing.T) {
		// KIP-511: an ApiVersions request newer than the broker knows gets
		// UNSUPPORTED_VERSION (35) in a v0 body, with response header v0, and the
		// body lists the ApiVersions versions the broker supports, so that the
		// client can retry with one of them.
		c := dialRaw(t, b.KafkaAddr)
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 99
		req.ClientSoftwareName = "sluice-compat"
		req.ClientSoftwareVersion = "0.1"
		resp, err := c.roundTrip(req, 0)
		if err != nil {
			t.Fatalf("ApiVersions v99: %v", err)
		}
		r := resp.(*kmsg.ApiVersionsResponse)
		// A v0 body is exactly: error code, int32 array length, 6 bytes per key.
		if want := 2 + 4 + 6*len(r.ApiKeys); len(c.lastBody) != want {
			t.Errorf("ApiVersions v99: body is %d bytes, a v0 body with %d keys is %d (was it encoded at another version?)", len(c.lastBody), len(r.ApiKeys), want)
		}
		if r.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Errorf("ApiVersions v99: error code %d, want %d (UNSUPPORTED_VERSION)", r.ErrorCode, kerr.UnsupportedVersion.Code)
		}
		found := false
		for _, k := range r.ApiKeys {
			if k.ApiKey == 18 {
				found = true
				if k.MinVersion != 0 || k.MaxVersion < 3 {
					t.Errorf("ApiVersions v99: lists ApiVersions v%d-v%d, want v0 to at least v3", k.MinVersion, k.MaxVersion)
				}
			}
		}
		if !found {
			t.Errorf("ApiVersions v99: the v0 body does not list ApiVersions (key 18): %+v", r.ApiKeys)
		}
		// The same connection then works at a supported version, as a client's retry does.
		c.apiVersions()
		requireHealthy(t, b)
	})

	run("GarbageBody", func(t *testing.T) {
		// A well-framed Metadata v12 request whose body is not a Metadata
		// request. Kafka: parsing throws, the connection is closed.
		c := dialRaw(t, b.KafkaAddr)
		body := append(frameHeader(3, 12, 1), 0) // + empty header tags
		body = append(body, 0xff, 0xff, 0xff, 0xff, 0x0f, 0xde, 0xad, 0xbe, 0xef)
		if err := c.write(sizePrefixed(int32(len(body)), body)); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(5 * time.Second)
		requireHealthy(t, b)
	})

	run("HugeArrayLength", func(t *testing.T) {
		// Produce v3 (non-flexible) claiming 2^31-1 topics in a 30-byte frame:
		// the decoder must check the length against the bytes left before
		// allocating, and close the connection.
		c := dialRaw(t, b.KafkaAddr)
		body := frameHeader(0, 3, 1)
		body = kbin.AppendNullableString(body, nil) // transactional id
		body = kbin.AppendInt16(body, -1)           // acks
		body = kbin.AppendInt32(body, 1000)         // timeout
		body = kbin.AppendInt32(body, 1<<31-1)      // topics array length
		if err := c.write(sizePrefixed(int32(len(body)), body)); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(5 * time.Second)
		requireHealthy(t, b)
	})

	run("AcksZeroGetsNoResponse", func(t *testing.T) {
		// Kafka sends nothing back for acks=0 (kafka-go's default), but
		// appends the batch. The next request's response must be the next
		// thing on the wire.
		const topic = "acks-zero"
		adm := newAdmin(t, b.KafkaAddr)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		createTopic(ctx, t, adm, topic, 1, nil)
		c := dialRaw(t, b.KafkaAddr)
		v := pickVersion(t, c.apiVersions(), 0, 12)
		req := kmsg.NewPtrProduceRequest()
		req.Version = v
		req.Acks = 0
		req.TimeoutMillis = 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = recordBatch("fire-and-forget")
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		c.send(req)
		c.apiVersions() // fails on a correlation id mismatch if the produce was answered
		deadline := time.Now().Add(10 * time.Second)
		for endOffsets(ctx, t, adm, topic)[0] != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("the acks=0 record was not appended within 10s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		requireHealthy(t, b)
	})

	run("CorruptBatchCRC", func(t *testing.T) {
		// Kafka: batch.ensureValid() throws CorruptRecordException, answered as
		// CORRUPT_MESSAGE (2) for the partition; nothing is appended.
		const topic = "crc-check"
		adm := newAdmin(t, b.KafkaAddr)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		createTopic(ctx, t, adm, topic, 1, nil)

		c := dialRaw(t, b.KafkaAddr)
		v := pickVersion(t, c.apiVersions(), 0, 12) // v13 addresses topics by id
		bad := recordBatch("corrupt-1", "corrupt-2")
		bad[len(bad)-1] ^= 0xff // flip a byte inside the last record: the CRC no longer matches
		if got := produceRaw(t, c, v, topic, 0, bad); got.ErrorCode != kerr.CorruptMessage.Code {
			t.Errorf("Produce v%d with a bad CRC: error code %d (%v), want %d (CORRUPT_MESSAGE)",
				v, got.ErrorCode, kerr.ErrorForCode(got.ErrorCode), kerr.CorruptMessage.Code)
		}
		if e := endOffsets(ctx, t, adm, topic)[0]; e != 0 {
			t.Errorf("after a rejected batch the high watermark is %d, want 0", e)
		}
		// The same batch with its correct CRC is accepted, on the same connection.
		if got := produceRaw(t, c, v, topic, 0, recordBatch("good-1", "good-2")); got.ErrorCode != 0 || got.BaseOffset != 0 {
			t.Errorf("Produce v%d with a valid batch: error code %d (%v), base offset %d; want 0, 0",
				v, got.ErrorCode, kerr.ErrorForCode(got.ErrorCode), got.BaseOffset)
		}
		if e := endOffsets(ctx, t, adm, topic)[0]; e != 2 {
			t.Errorf("after one valid 2-record batch the high watermark is %d, want 2", e)
		}
		requireHealthy(t, b)
	})
}

// TestProduceUnknownTopicNoAutoCreate starts a broker with topic
// auto-creation off and produces to a topic that does not exist: Kafka
// answers UNKNOWN_TOPIC_OR_PARTITION (3) and creates nothing (Produce never
// auto-creates in Kafka; Metadata does, and here it must not).
func TestProduceUnknownTopicNoAutoCreate(t *testing.T) {
	t.Parallel()
	b := harness.Start(t, autoCreateOff())
	requireHealthy(t, b)
	const topic = "no-such-topic"

	c := dialRaw(t, b.KafkaAddr)
	versions := c.apiVersions()
	v := pickVersion(t, versions, 0, 12)
	if got := produceRaw(t, c, v, topic, 0, recordBatch("x")); got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("Produce v%d to a missing topic: error code %d (%v), want %d (UNKNOWN_TOPIC_OR_PARTITION)",
			v, got.ErrorCode, kerr.ErrorForCode(got.ErrorCode), kerr.UnknownTopicOrPartition.Code)
	}

	// Metadata that allows auto-creation must not create it either.
	mv := pickVersion(t, versions, 3, 12)
	for i := 0; i < 2; i++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = mv
		req.AllowAutoTopicCreation = true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := c.roundTrip(req, mv)
		if err != nil {
			t.Fatalf("Metadata v%d: %v", mv, err)
		}
		r := resp.(*kmsg.MetadataResponse)
		if len(r.Topics) != 1 {
			t.Fatalf("Metadata v%d for one topic: %d topics in the answer", mv, len(r.Topics))
		}
		if got := r.Topics[0].ErrorCode; got != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("Metadata v%d (allow auto-create, #%d) for a missing topic with auto.create.topics.enable=false: error code %d (%v), want %d",
				mv, i+1, got, kerr.ErrorForCode(got), kerr.UnknownTopicOrPartition.Code)
		}
	}
	requireHealthy(t, b)
}
