package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/protocol"
)

// logAdminKeys are the APIs whose decode and handler paths
// FuzzLogAdminRequests drives.
var logAdminKeys = []int16{21, 35, 61, 75}

// FuzzLogAdminRequests sends arbitrary bodies for DeleteRecords,
// DescribeLogDirs, DescribeProducers and DescribeTopicPartitions, at every
// advertised version, to a real broker with a topic holding data. The
// broker must answer with the request's correlation id or close the
// connection (a body that does not decode), never crash or stall, and keep
// serving.
func FuzzLogAdminRequests(f *testing.F) {
	// The broker logs from its own goroutines, where the fuzz engine
	// forbids calls on f: it logs nowhere.
	b := startBroker(quietTB{f}, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		f.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "fz"); err != nil {
		f.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "fz", Value: []byte("x")}).FirstErr(); err != nil {
		f.Fatal(err)
	}
	for _, key := range logAdminKeys {
		r, _ := protocol.Versions(key)
		for v := r.Min; v <= r.Max; v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			switch q := req.(type) {
			case *kmsg.DeleteRecordsRequest:
				q.TimeoutMillis = 100
				q.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "fz", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: -1}, {Partition: 3, Offset: 2}}}}
			case *kmsg.DescribeLogDirsRequest:
				q.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: "fz", Partitions: []int32{0, 1}}}
			case *kmsg.DescribeProducersRequest:
				q.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "fz", Partitions: []int32{0, -1}}}
			case *kmsg.DescribeTopicPartitionsRequest:
				q.ResponsePartitionLimit = 1
				q.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "fz", Partition: 1}
			}
			f.Add(uint8(key), uint8(v), req.AppendTo(nil))
		}
	}
	f.Fuzz(func(t *testing.T, keyb, vb uint8, body []byte) {
		key := logAdminKeys[int(keyb)%len(logAdminKeys)]
		r, _ := protocol.Versions(key)
		v := r.Min + int16(vb)%(r.Max-r.Min+1)
		req := kmsg.RequestForKey(key)
		req.SetVersion(v)
		frame := binary.BigEndian.AppendUint32(nil, 0) // length, set below
		frame = binary.BigEndian.AppendUint16(frame, uint16(key))
		frame = binary.BigEndian.AppendUint16(frame, uint16(v))
		frame = binary.BigEndian.AppendUint32(frame, 77)
		frame = binary.BigEndian.AppendUint16(frame, 0xffff) // null client id
		if req.IsFlexible() {
			frame = append(frame, 0) // no header tags
		}
		frame = append(frame, body...)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		roundTrip(t, b.addr, frame, true)
		// Still serving: an ApiVersions round trip.
		av := kmsg.NewPtrApiVersionsRequest()
		ok := kmsg.NewRequestFormatter().AppendRequest(nil, av, 78)
		roundTrip(t, b.addr, ok, false)
	})
}

// roundTrip sends frame on a new connection and reads the answer; a
// closed connection is accepted only when mayClose is set.
func roundTrip(t *testing.T, addr string, frame []byte, mayClose bool) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	resp, err := protocol.ReadFrame(bufio.NewReader(nc), nil, 1<<30)
	switch {
	case err == nil:
		if corr := int32(binary.BigEndian.Uint32(resp)); corr != int32(binary.BigEndian.Uint32(frame[8:])) {
			t.Fatalf("answer with correlation id %d", corr)
		}
	case mayClose && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || (isReset(err) && !errors.Is(err, os.ErrDeadlineExceeded))):
	default:
		t.Fatalf("no answer: %v", err)
	}
}

// quietTB is f for the broker's helpers, without logging.
type quietTB struct{ testing.TB }

func (quietTB) Helper()             {}
func (quietTB) Log(...any)          {}
func (quietTB) Logf(string, ...any) {}
