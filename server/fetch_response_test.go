package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/protocol"
)

// rangeLog is a log of batches from a few hundred bytes to ~60 KiB, so
// that ranges fall on both sides of inlineRangeBytes.
func rangeLog(t *testing.T) *log.Log {
	t.Helper()
	cfg := log.DefaultConfig()
	cfg.RetentionMs = -1
	cfg.SegmentBytes = 4 << 20
	l, err := log.Open(t.TempDir(), cfg, log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < 150; i++ {
		n, size := 1+rng.Intn(10), rng.Intn(3000)
		if i%10 == 0 {
			n, size = 20, 3000
		}
		if _, err := l.Append(makeTestBatch(n, size)); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// render puts the ranges' bytes where appendFrame said they go.
func render(t *testing.T, frame []byte, splices []splice) []byte {
	t.Helper()
	var out []byte
	prev := 0
	for _, sp := range splices {
		out = append(out, frame[prev:sp.at]...)
		b, err := sp.r.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
		prev = sp.at
	}
	return append(out, frame[prev:]...)
}

// fetchWireCase builds a response of nparts partitions over two topics:
// some with records, some empty, some with an error, some with tagged
// fields after the records (v12+), all reading from l.
func fetchWireCase(t *testing.T, l *log.Log, version int16, nparts int, rng *rand.Rand) *fetchWire {
	t.Helper()
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	resp.SessionID = 0
	var parts []fetchPart
	topics := 2
	if nparts < 2 {
		topics = 1
	}
	for ti := 0; ti < topics; ti++ {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = fmt.Sprintf("topic-%d", ti)
		rng.Read(rt.TopicID[:])
		n := nparts / topics
		if ti == 0 {
			n += nparts % topics
		}
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, n)
		resp.Topics = append(resp.Topics, rt)
	}
	leo := l.LogEndOffset()
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			sp := &resp.Topics[ti].Partitions[pi]
			*sp = kmsg.NewFetchResponseTopicPartition()
			sp.Partition = int32(pi)
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = leo, leo, 0
			sp.PreferredReadReplica = -1
			sp.RecordBatches = []byte{}
			if version >= 12 && pi%3 == 1 {
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = 2, 9 // a tag after the records
			}
			fp := fetchPart{resp: sp}
			switch pi % 5 {
			case 0:
				sp.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER: no records
			case 1:
				// caught up: no records
			default:
				sizes := []int{1, 5000, 16 << 10, 100 << 10, 1 << 20}
				if nparts > 100 {
					sizes = sizes[:2] // many small ranges, as a tail consumer reads
				}
				maxBytes := sizes[rng.Intn(len(sizes))]
				res, err := l.ReadRange(rng.Int63n(leo), maxBytes, leo-int64(rng.Intn(3)))
				if err != nil {
					t.Fatal(err)
				}
				fp.rng = res.Range
			}
			parts = append(parts, fp)
		}
	}
	return &fetchWire{FetchResponse: resp, parts: parts}
}

// The spliced frame, ranges put in place, is byte for byte what kmsg
// encodes with the records in memory, at every version, for few and many
// partitions.
func TestFetchWireMatchesWholeEncoding(t *testing.T) {
	l := rangeLog(t)
	rng := rand.New(rand.NewSource(1))
	for v := int16(4); v <= 18; v++ {
		for _, nparts := range []int{1, 7, 1000} {
			if nparts == 1000 && v != 4 && v != 11 && v != 12 && v != 18 {
				continue // the encoding of many partitions: one version per form
			}
			t.Run(fmt.Sprintf("v%d/%d", v, nparts), func(t *testing.T) {
				w := fetchWireCase(t, l, v, nparts, rng)
				defer w.release()
				frame, splices := w.appendFrame([]byte("pre"), 42)
				got := render(t, frame, splices)[3:]
				nonEmpty := 0
				for i := range w.parts {
					fp := &w.parts[i]
					if fp.resp.RecordBatches == nil || len(fp.resp.RecordBatches) != 0 {
						t.Fatal("records field not restored to empty")
					}
					if fp.rng.Len > 0 {
						nonEmpty++
						b, err := fp.rng.Bytes()
						if err != nil {
							t.Fatal(err)
						}
						fp.resp.RecordBatches = b
					}
				}
				if len(splices) != nonEmpty {
					t.Fatalf("%d splices for %d ranges", len(splices), nonEmpty)
				}
				want := protocol.AppendResponse(nil, 42, w.FetchResponse)
				if !bytes.Equal(got, want) {
					t.Fatalf("spliced frame (%d bytes) differs from the whole encoding (%d bytes)", len(got), len(want))
				}
				// The fallback that reads the ranges into memory encodes
				// the same frame.
				for i := range w.parts {
					w.parts[i].resp.RecordBatches = []byte{}
				}
				if inl, _ := w.inline(nil, 42); !bytes.Equal(inl, want) {
					t.Fatalf("inline frame (%d bytes) differs from the whole encoding (%d bytes)", len(inl), len(want))
				}
				// And a client decodes it.
				dec := kmsg.NewPtrFetchResponse()
				dec.Version = v
				body := want[8:]
				if v >= 12 {
					body = body[1:]
				}
				if err := dec.ReadFrom(body); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// The writer sends the same bytes whichever way each range goes: inline
// into its buffer, with sendfile over TCP, or copied over a pipe.
func TestWriteSpliced(t *testing.T) {
	l := rangeLog(t)
	rng := rand.New(rand.NewSource(2))
	for _, network := range []string{"tcp", "pipe"} {
		for _, v := range []int16{4, 11, 12, 16, 18} {
			t.Run(fmt.Sprintf("%s/v%d", network, v), func(t *testing.T) {
				var frames [][]byte
				var wires []*fetchWire
				var want []byte
				for i := 0; i < 4; i++ {
					w := fetchWireCase(t, l, v, 3+i*20, rng)
					wires = append(wires, w)
					f, s := w.appendFrame(nil, int32(i))
					frames = append(frames, f)
					want = append(want, render(t, f, s)...)
				}
				var client, server net.Conn
				if network == "pipe" {
					client, server = net.Pipe()
				} else {
					ln, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						t.Fatal(err)
					}
					defer ln.Close()
					if client, err = net.Dial("tcp", ln.Addr().String()); err != nil {
						t.Fatal(err)
					}
					if server, err = ln.Accept(); err != nil {
						t.Fatal(err)
					}
				}
				defer client.Close()
				got := make(chan []byte)
				go func() {
					b, _ := io.ReadAll(client)
					got <- b
				}()
				bw := bufio.NewWriterSize(server, 64<<10)
				for i, w := range wires {
					f, s := w.appendFrame(nil, int32(i))
					if !bytes.Equal(f, frames[i]) {
						t.Fatal("appendFrame is not repeatable")
					}
					if err := writeSpliced(bw, server, f, s); err != nil {
						t.Fatal(err)
					}
					w.release()
				}
				if err := bw.Flush(); err != nil {
					t.Fatal(err)
				}
				server.Close()
				if b := <-got; !bytes.Equal(b, want) {
					t.Fatalf("received %d bytes, want %d, or they differ", len(b), len(want))
				}
			})
		}
	}
}
