package protocol

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceTestRequest is a request of every kind of records field: null,
// empty, small (left in the frame) and large (a buffer of its own), over
// two topics, with a transactional id and tagged fields when flexible.
func produceTestRequest(version int16) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, -1, 1234
	txn := "txn"
	req.TransactionID = &txn
	large := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }
	for ti, recs := range [][][]byte{
		{nil, {}, []byte("small"), large(SplitBatchMin, 1)},
		{large(SplitBatchMin+1000, 2), large(SplitBatchMin-1, 3), large(3*SplitBatchMin, 4)},
	} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = []string{"a", "topic-b"}[ti]
		rt.TopicID = [16]byte{byte(ti + 1), 9}
		if version >= 9 {
			rt.UnknownTags.Set(7, []byte("topic tag"))
		}
		for p, r := range recs {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = int32(p*3), r
			if version >= 9 && p == 1 {
				rp.UnknownTags.Set(3, []byte("x"))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if version >= 9 {
		req.UnknownTags.Set(11, []byte("request tag"))
	}
	return req
}

// decodeWhole decodes a frame body (header included) as conn.handle does.
func decodeWhole(t *testing.T, frame []byte, version int16) *kmsg.ProduceRequest {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	_, body, err := ParseRequestHeader(frame, req.IsFlexible())
	if err != nil {
		t.Fatal(err)
	}
	if err := req.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestReadProduceFrameDecodesAsTheWholeFrame(t *testing.T) {
	for version := int16(3); version <= 13; version++ {
		req := produceTestRequest(version)
		full := kmsg.NewRequestFormatter(kmsg.FormatterClientID("cl")).AppendRequest(nil, req, 42)
		body := full[4:]
		want := decodeWhole(t, body, version)

		f, err := ReadProduceFrame(bytes.NewReader(body), len(body))
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if len(f.Frame) > len(body)-5*SplitBatchMin || len(f.Batches) != 3 {
			t.Fatalf("v%d: frame of %d bytes (request %d), %d batches taken out", version, len(f.Frame), len(body), len(f.Batches))
		}
		got := decodeWhole(t, f.Frame, version)
		if err := f.Attach(got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("v%d: decoded differently from the whole frame", version)
		}

		// As a stream: the same topics, partitions and records.
		s := NewProduceStream(bytes.NewReader(body), len(body))
		if err := s.ReadPrefix(); err != nil {
			t.Fatal(err)
		}
		if s.Version != version || s.Acks != -1 || s.TimeoutMillis != 1234 || s.TransactionID == nil || *s.TransactionID != "txn" || s.Streamable() {
			t.Fatalf("v%d: prefix %+v", version, s)
		}
		for ti := 0; ; ti++ {
			name, id, n, ok, err := s.NextTopic()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				if ti != len(want.Topics) {
					t.Fatalf("v%d: %d topics", version, ti)
				}
				break
			}
			wt := want.Topics[ti]
			if (version < 13 && name != wt.Topic) || (version >= 13 && id != wt.TopicID) || n != len(wt.Partitions) {
				t.Fatalf("v%d: topic %d: %q %v %d", version, ti, name, id, n)
			}
			for pi := range n {
				p, recs, _, err := s.NextPartition()
				if err != nil {
					t.Fatal(err)
				}
				wp := wt.Partitions[pi]
				if p != wp.Partition || !bytes.Equal(recs, wp.Records) || (recs == nil) != (wp.Records == nil) {
					t.Fatalf("v%d: topic %d partition %d: %d, %d bytes", version, ti, pi, p, len(recs))
				}
			}
		}
		if err := s.Finish(); err != nil {
			t.Fatal(err)
		}

		// Cut anywhere: an error, never a request.
		for _, cut := range []int{3, 9, 20, 40, len(body) / 3, len(body) - 1} {
			if _, err := ReadProduceFrame(bytes.NewReader(body[:cut]), len(body)); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("v%d: cut at %d: %v", version, cut, err)
			}
		}
	}
}

// Lengths beyond the frame are refused before anything of their size is
// allocated.
func TestReadProduceFrameRefusesLengthsPastTheFrame(t *testing.T) {
	req := produceTestRequest(8)
	body := kmsg.NewRequestFormatter(kmsg.FormatterClientID("cl")).AppendRequest(nil, req, 1)[4:]
	// The frame claims fewer bytes than the request has.
	if _, err := ReadProduceFrame(bytes.NewReader(body), len(body)-SplitBatchMin); !errors.Is(err, ErrProduceFrame) {
		t.Fatalf("short frame: %v", err)
	}
}
