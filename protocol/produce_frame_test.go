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

// FuzzProduceFrame: any body, read whole (ReadProduceFrame) or as a
// stream (ProduceStream), never panics. For a Produce version the broker
// serves: the frame read whole decodes with kmsg as the body read at once
// does (the same request, or both refused), and a stream read to its end
// gives kmsg's topics, partitions and records.
func FuzzProduceFrame(f *testing.F) {
	// Small seeds (records of a few bytes: the stream reads every records
	// field into a buffer of its own whatever its size); the large ones
	// of the tests above make each run of the fuzzer a hundred times
	// slower.
	for version := int16(3); version <= 13; version++ {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = version, -1, 1000
		for ti, name := range []string{"a", "bb"} {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = name, [16]byte{byte(ti + 1)}
			for p, r := range [][]byte{nil, {}, []byte("records")} {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition, rp.Records = int32(p), r
				if version >= 9 && p == 2 {
					rp.UnknownTags.Set(1, []byte("t"))
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		body := kmsg.NewRequestFormatter(kmsg.FormatterClientID("cl")).AppendRequest(nil, req, 7)[4:]
		f.Add(body)
		f.Add(body[:len(body)/2])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) < 4 {
			return
		}
		// The broker reads a frame this way only for Produce at a
		// version it serves (conn.splitProduce); any other input must
		// still be refused without a panic.
		key, version := int16(body[0])<<8|int16(body[1]), int16(body[2])<<8|int16(body[3])
		served := key == 0 && version >= ProduceMinServed && Supported(key, version)
		want := kmsg.NewPtrProduceRequest()
		want.SetVersion(version)
		var wantErr error
		if !served {
			wantErr = errors.New("not a Produce version the broker serves")
		} else if _, rest, err := ParseRequestHeader(body, want.IsFlexible()); err != nil {
			wantErr = err
		} else {
			wantErr = want.ReadFrom(rest)
		}

		fr, err := ReadProduceFrame(bytes.NewReader(body), len(body))
		if err == nil {
			defer fr.Release()
		}
		if err == nil && served {
			got := kmsg.NewPtrProduceRequest()
			got.SetVersion(version)
			_, rest, gotErr := ParseRequestHeader(fr.Frame, got.IsFlexible())
			if gotErr == nil {
				gotErr = got.ReadFrom(rest)
			}
			if (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("read whole: the frame decodes with %v, the body with %v", gotErr, wantErr)
			}
			if gotErr == nil {
				if err := fr.Attach(got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("read whole: decoded differently from the whole body")
				}
			}
		}

		s := NewProduceStream(bytes.NewReader(body), len(body))
		defer s.Frame().Release()
		if err := s.ReadPrefix(); err != nil {
			return
		}
		// The broker parses the header it read (handleProduceStream).
		if _, _, err := ParseRequestHeader(s.Frame().Frame, version >= 9); err != nil {
			return
		}
		type part struct {
			p    int32
			recs []byte
		}
		var parts []part
		for {
			_, _, n, ok, err := s.NextTopic()
			if err != nil {
				return
			}
			if !ok {
				break
			}
			for range n {
				p, recs, i, err := s.NextPartition()
				if err != nil {
					return
				}
				parts = append(parts, part{p, bytes.Clone(recs)})
				if i >= 0 {
					s.ReleaseBatch(i)
				}
			}
		}
		if err := s.Finish(); err != nil || !served {
			return
		}
		if wantErr != nil {
			t.Fatalf("stream: read to its end what kmsg refuses (%v)", wantErr)
		}
		var wantParts []part
		for _, wt := range want.Topics {
			for _, wp := range wt.Partitions {
				wantParts = append(wantParts, part{wp.Partition, wp.Records})
			}
		}
		if len(parts) != len(wantParts) {
			t.Fatalf("stream: %d partitions, kmsg %d", len(parts), len(wantParts))
		}
		for i := range parts {
			if parts[i].p != wantParts[i].p || !bytes.Equal(parts[i].recs, wantParts[i].recs) {
				t.Fatalf("stream: partition %d differs", i)
			}
		}
	})
}
