package compat

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// brokerPid finds the broker process by its data directory, which is
// unique to the test, on its command line.
func brokerPid(t *testing.T, b *harness.Broker) int {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmd, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if len(args) > 1 && args[1] == "dev" && bytes.Contains(cmd, []byte("\x00"+b.DataDir+"\x00")) {
			pid, _ := strconv.Atoi(filepath.Base(d))
			return pid
		}
	}
	t.Fatalf("no process runs with data dir %s", b.DataDir)
	return 0
}

// procStatusKB reads a kB field (VmHWM: peak RSS, VmRSS) of
// /proc/PID/status.
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestCreateTopicsHugePartitionCount: a CreateTopics asking for
// 2,147,483,647 partitions used to kill `sluice dev` (runtime: out of
// memory). Kafka's controller refuses a request adding more than 10,000
// partitions with POLICY_VIOLATION; so does Sluice (max.partitions.per.request),
// for CreatePartitions too, and the broker goes on serving.
func TestCreateTopicsHugePartitionCount(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := harness.Context(t, 60*time.Second)
	adm := newAdmin(t, b.KafkaAddr)
	// kadm returns the topic's error as the call's error too.
	resp, err := adm.CreateTopic(ctx, 2147483647, 1, nil, "huge")
	if err != nil && !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("CreateTopics: %v", err)
	}
	if !errors.Is(resp.Err, kerr.PolicyViolation) || resp.ErrMessage == "" {
		t.Fatalf("CreateTopics of 2147483647 partitions: %v (%q), want POLICY_VIOLATION with a message", resp.Err, resp.ErrMessage)
	}
	createTopic(ctx, t, adm, "small", 1, nil)
	ur, err := adm.UpdatePartitions(ctx, 2147483647, "small")
	if err != nil {
		t.Fatalf("CreatePartitions: %v", err)
	}
	if r := ur["small"]; !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("CreatePartitions to 2147483647: %v, want POLICY_VIOLATION", r.Err)
	}
	topics := freshTopics(ctx, t, b.KafkaAddr, "huge", "small")
	if topics["huge"].ErrorCode != kerr.UnknownTopicOrPartition.Code || len(topics["small"].Partitions) != 1 {
		t.Fatalf("after the refusals: huge code %d, small %d partitions", topics["huge"].ErrorCode, len(topics["small"].Partitions))
	}
	requireHealthy(t, b)
	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic("small"))
	if err := cl.ProduceSync(ctx, kgo.StringRecord("still-serving")).FirstErr(); err != nil {
		t.Fatalf("produce after the refusals: %v", err)
	}
	pid := brokerPid(t, b)
	t.Logf("broker peak RSS (VmHWM): %d kB", procStatusKB(t, pid, "VmHWM"))
}

// Decompression bombs: about 1 MB compressed (under the default
// max.message.bytes, 1048588, so the compressed size passes) inflating to
// far more. Kafka would inflate them record by record; Sluice refuses each
// with MESSAGE_TOO_LARGE once its records pass max.message.bytes.

// zstdBomb is a zstd frame without a content size whose blocks are RLE
// blocks of 128 KiB of zeros, 4 bytes each: n blocks inflate to n*128 KiB.
func zstdBomb(n int) []byte {
	f := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38} // magic, no FCS, window 128 KiB
	for i := 0; i < n; i++ {
		hdr := uint32(1<<1 | (128<<10)<<3) // RLE block of 128 KiB
		if i == n-1 {
			hdr |= 1 // last block
		}
		f = append(f, byte(hdr), byte(hdr>>8), byte(hdr>>16), 0)
	}
	return f
}

// gzipBomb repeats the deflate blocks of one flushed 1 MiB chunk of zeros
// (the same bytes each time, since the window holds only zeros): n chunks
// inflate to n MiB. The trailer's CRC does not match: the broker must
// stop long before it reads it.
func gzipBomb(n int) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	zeros := make([]byte, 1<<20)
	w.Write(zeros)
	w.Flush()
	start := buf.Len()
	w.Write(zeros)
	w.Flush()
	chunk := append([]byte(nil), buf.Bytes()[start:]...)
	for i := 0; i < n; i++ {
		buf.Write(chunk)
	}
	w.Close()
	return buf.Bytes()
}

func lz4Bomb(mib int) []byte {
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	zeros := make([]byte, 1<<20)
	for i := 0; i < mib; i++ {
		w.Write(zeros)
	}
	w.Close()
	return buf.Bytes()
}

// xerialBomb is Java-client-framed snappy: n blocks of 64 KiB of zeros.
func xerialBomb(n int) []byte {
	out := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	blk := s2.EncodeSnappy(nil, make([]byte, 64<<10))
	for i := 0; i < n; i++ {
		out = binary.BigEndian.AppendUint32(out, uint32(len(blk)))
		out = append(out, blk...)
	}
	return out
}

// bombBatch wraps compressed records in a v2 batch claiming one record.
func bombBatch(codec int16, records []byte) []byte {
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: codec, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: records}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// produceOnce sends one Produce v9 of batch over its own connection and
// returns the partition's error code; safe from any goroutine.
func produceOnce(addr, topic string, batch []byte) (int16, error) {
	nc, err := dialTimeout(addr)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = 1
	req.TimeoutMillis = 10000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batch
	tp.Partitions = append(tp.Partitions, pp)
	req.Topics = append(req.Topics, tp)
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := nc.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("bomb")).AppendRequest(nil, req, 1)); err != nil {
		return 0, err
	}
	var size [4]byte
	if _, err := readFull(nc, size[:]); err != nil {
		return 0, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := readFull(nc, body); err != nil {
		return 0, err
	}
	rd := kbin.Reader{Src: body}
	rd.Int32()                          // correlation id
	for n := rd.Uvarint(); n > 0; n-- { // response header tags
		rd.Uvarint()
		rd.Span(int(rd.Uvarint()))
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Version = 9
	if err := resp.ReadFrom(rd.Src); err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("response has %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

func readFull(nc interface{ Read([]byte) (int, error) }, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := nc.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestDecompressionBombs: six connections at once send bombs of every
// codec (gzip, snappy, xerial-framed snappy, lz4, zstd), each about 1 MB
// compressed and inflating to 16 MiB (snappy) up to 32 GiB (zstd). Every
// one is answered MESSAGE_TOO_LARGE, a franz-go producer (zstd) and
// consumer keep working meanwhile, and the broker's peak RSS stays
// bounded: inflation stops at max.message.bytes and counts against
// queued.max.request.bytes.
func TestDecompressionBombs(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := harness.Context(t, 120*time.Second)
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, "bombs", 1, nil)
	createTopic(ctx, t, adm, "legit", 1, nil)
	pid := brokerPid(t, b)
	before := procStatusKB(t, pid, "VmHWM")

	bombs := []struct {
		name    string
		codec   int16
		records []byte
	}{
		{"gzip", 1, gzipBomb(900)}, // ~1 GiB
		{"snappy", 2, s2.EncodeSnappy(nil, make([]byte, 16<<20))},
		{"xerial", 2, xerialBomb(300)}, // ~19 MiB
		{"lz4", 3, lz4Bomb(240)},       // 240 MiB
		{"zstd", 4, zstdBomb(250000)},  // ~30 GiB
	}
	for _, bm := range bombs {
		if len(bm.records) > 1048588-100 {
			t.Fatalf("%s bomb is %d bytes, over max.message.bytes: it would not test inflation", bm.name, len(bm.records))
		}
		t.Logf("%s bomb: %d bytes compressed", bm.name, len(bm.records))
	}

	// Legitimate traffic meanwhile: a zstd producer and a consumer.
	prod := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic("legit"), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	var produced atomic.Int64
	stopProd := make(chan struct{})
	prodDone := make(chan error, 1)
	go func() {
		var err error
		for i := 0; err == nil; i++ {
			select {
			case <-stopProd:
				prodDone <- nil
				return
			default:
			}
			err = prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("legit-%d-%s", i, strings.Repeat("x", 200)))).FirstErr()
			if err == nil {
				produced.Add(1)
			}
		}
		prodDone <- err
	}()

	const attackers, rounds = 6, 3
	var wg sync.WaitGroup
	var failures sync.Map
	var answered atomic.Int64
	for a := 0; a < attackers; a++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				for _, bm := range bombs {
					code, err := produceOnce(b.KafkaAddr, "bombs", bombBatch(bm.codec, bm.records))
					switch {
					case err != nil:
						failures.Store(bm.name, err.Error())
					case code != kerr.MessageTooLarge.Code:
						failures.Store(bm.name, fmt.Sprintf("error code %d, want MESSAGE_TOO_LARGE (10)", code))
					default:
						answered.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stopProd)
	if err := <-prodDone; err != nil {
		t.Errorf("legitimate producer failed during the attack: %v", err)
	}
	failures.Range(func(k, v any) bool {
		t.Errorf("%s bomb: %v", k, v)
		return true
	})
	after := procStatusKB(t, pid, "VmHWM")
	t.Logf("%d bombs answered MESSAGE_TOO_LARGE; %d legitimate records produced meanwhile; broker VmHWM %d kB before, %d kB after",
		answered.Load(), produced.Load(), before, after)

	// Nothing of the bombs is in the log; every legitimate record is read back.
	if ends := endOffsets(ctx, t, adm, "bombs"); ends[0] != 0 {
		t.Errorf("bombs topic high watermark %d, want 0", ends[0])
	}
	ends := endOffsets(ctx, t, adm, "legit")
	if ends[0] != produced.Load() || produced.Load() == 0 {
		t.Errorf("legit high watermark %d, produced %d", ends[0], produced.Load())
	}
	got := consumeAll(ctx, t, b.KafkaAddr, "legit", ends)
	if int64(len(got[0])) != produced.Load() {
		t.Errorf("consumed %d legitimate records, produced %d", len(got[0]), produced.Load())
	}
	requireHealthy(t, b)
	// Each bomb inflates to at most max.message.bytes (1 MiB) plus
	// decoder state under the 100 MiB request budget; before the fix a
	// single zstd bomb inflated to 256 MiB and six at once to 1.5 GiB.
	if after > 512<<10 {
		t.Errorf("broker peak RSS %d kB under the bombs, want under 512 MiB", after)
	}
}

// TestGroupMaxSize: with group.max.size=2 and group.consumer.max.size=2,
// a third franz-go consumer joining a classic group gets
// GROUP_MAX_SIZE_REACHED from PollFetches (an ErrGroupSession), and one
// joining a KIP-848 group (ServerSideBalancer) gets it from
// ConsumerGroupHeartbeat (franz-go logs it and retries), while the first
// two consume.
func TestGroupMaxSize(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "--set", "group.max.size=2", "--set", "group.consumer.max.size=2")
	ctx := harness.Context(t, 90*time.Second)
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, "members", 2, nil)
	prod := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic("members"))
	for i := 0; i < 20; i++ {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("r%d", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"classic", nil},
		{"kip848", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := "g-" + tc.name
			var logs syncBuffer
			member := func(extra ...kgo.Opt) *kgo.Client {
				opts := append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics("members"),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
					kgo.WithLogger(kgo.BasicLogger(&logs, kgo.LogLevelWarn, nil))}, tc.opts...)
				return newClient(t, b.KafkaAddr, append(opts, extra...)...)
			}
			// Two members consume all 20 records between them.
			var consumed atomic.Int64
			pctx, stop := context.WithCancel(ctx)
			defer stop()
			var wg sync.WaitGroup
			for i := 0; i < 2; i++ {
				cl := member()
				wg.Add(1)
				go func() {
					defer wg.Done()
					for pctx.Err() == nil {
						fs := cl.PollFetches(pctx)
						consumed.Add(int64(fs.NumRecords()))
					}
				}()
			}
			deadline := time.Now().Add(45 * time.Second)
			for consumed.Load() < 20 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if consumed.Load() < 20 {
				t.Fatalf("two members consumed %d of 20 records", consumed.Load())
			}
			// A third is refused.
			third := member()
			var refused bool
			for time.Now().Before(deadline) && !refused {
				fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				fs := third.PollFetches(fctx)
				cancel()
				fs.EachError(func(_ string, _ int32, err error) {
					if errors.Is(err, kerr.GroupMaxSizeReached) {
						refused = true
					}
				})
				if strings.Contains(logs.String(), kerr.GroupMaxSizeReached.Message) {
					refused = true
				}
			}
			if !refused {
				t.Fatalf("the third member was never told GROUP_MAX_SIZE_REACHED; its log:\n%s", logs.String())
			}
			stop()
			wg.Wait()
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a client's logger and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// The session-timeout bounds of classic groups are config keys with
// Kafka's names: a JoinGroup outside them is answered
// INVALID_SESSION_TIMEOUT, one inside joins; DescribeConfigs shows them.
func TestGroupSessionTimeoutBounds(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "--set", "group.min.session.timeout.ms=20000", "--set", "group.max.session.timeout.ms=40000")
	ctx := harness.Context(t, 60*time.Second)
	cl := newClient(t, b.KafkaAddr)
	join := func(sessionMs int32) int16 {
		t.Helper()
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 5
		req.Group = "bounds"
		req.SessionTimeoutMillis = sessionMs
		req.RebalanceTimeoutMillis = 1000
		req.ProtocolType = "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("JoinGroup: %v", err)
		}
		return resp.ErrorCode
	}
	for _, ms := range []int32{10000, 50000} {
		if code := join(ms); code != kerr.InvalidSessionTimeout.Code {
			t.Errorf("JoinGroup with session timeout %d ms: %v, want INVALID_SESSION_TIMEOUT", ms, kerr.ErrorForCode(code))
		}
	}
	// Inside the bounds: v5 asks for a member id first, then joins.
	if code := join(30000); code != 0 && code != kerr.MemberIDRequired.Code {
		t.Errorf("JoinGroup with session timeout 30000 ms: %v", kerr.ErrorForCode(code))
	}
	rc, err := kadm.NewClient(cl).DescribeBrokerConfigs(ctx, 1) // sluice dev is node 1
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rc {
		for _, c := range r.Configs {
			if c.Value != nil {
				got[c.Key] = *c.Value
			}
		}
	}
	if got["group.min.session.timeout.ms"] != "20000" || got["group.max.session.timeout.ms"] != "40000" {
		t.Errorf("DescribeConfigs: group.min.session.timeout.ms=%q group.max.session.timeout.ms=%q", got["group.min.session.timeout.ms"], got["group.max.session.timeout.ms"])
	}
}
