package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func frameOf(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func TestReadFrame(t *testing.T) {
	hdr := []byte{0, 18, 0, 3, 0, 0, 0, 9, 0xff, 0xff, 0}
	for _, tc := range []struct {
		name string
		in   []byte
		max  int32
		want error
	}{
		{"ok", frameOf(hdr), 100, nil},
		{"negative", []byte{0xff, 0xff, 0xff, 0xfe}, 100, ErrNegativeFrame},
		{"too large", binary.BigEndian.AppendUint32(nil, 101), 100, ErrFrameTooLarge},
		{"too short for a header", frameOf([]byte{1, 2, 3}), 100, ErrShortFrame},
		{"truncated body", frameOf(hdr)[:8], 100, io.ErrUnexpectedEOF},
		{"truncated size", []byte{0, 0}, 100, io.ErrUnexpectedEOF},
		{"eof", nil, 100, io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadFrame(bytes.NewReader(tc.in), nil, tc.max)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if err == nil && !bytes.Equal(got, hdr) {
				t.Fatalf("frame %x", got)
			}
		})
	}
}

func TestParseRequestHeader(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	for _, v := range []int16{0, 8, 9, 13} {
		req.Version = v
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("cli"))
		frame := f.AppendRequest(nil, req, 77)[4:]
		h, body, err := ParseRequestHeader(frame, req.IsFlexible())
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if h.Key != 3 || h.Version != v || h.CorrelationID != 77 || h.ClientID == nil || *h.ClientID != "cli" {
			t.Fatalf("v%d: header %+v", v, h)
		}
		var back kmsg.MetadataRequest
		back.Version = v
		if err := back.ReadFrom(body); err != nil {
			t.Fatalf("v%d body: %v", v, err)
		}
	}
	if _, _, err := ParseRequestHeader([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 50, 'x'}, false); err == nil {
		t.Fatal("client id longer than the frame accepted")
	}
	if _, _, err := ParseRequestHeader([]byte{0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 5, 1, 9}, true); err == nil {
		t.Fatal("tagged field longer than the frame accepted")
	}
}

func TestApiVersionsResponseHeaderIsV0(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3 // flexible body
	out := AppendResponse(nil, 5, resp)
	body := resp.AppendTo(nil)
	if len(out) != 4+4+len(body) {
		t.Fatalf("ApiVersions v3 response has a tagged header section: %d bytes, want %d", len(out), 8+len(body))
	}
	meta := kmsg.NewPtrMetadataResponse()
	meta.Version = 9
	out = AppendResponse(nil, 5, meta)
	if len(out) != 4+4+1+len(meta.AppendTo(nil)) {
		t.Fatal("flexible response without the v1 header's tag section")
	}
}

// FuzzRequest feeds arbitrary frames through header parsing and kmsg
// decoding as the connection does; nothing may panic, and an accepted
// header never claims bytes beyond the frame.
func FuzzRequest(f *testing.F) {
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed"))
	for _, req := range []kmsg.Request{kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrFetchRequest()} {
		for _, v := range []int16{0, req.MaxVersion()} {
			req.SetVersion(v)
			f.Add(fmtr.AppendRequest(nil, req, 1)[4:])
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 8 {
			return
		}
		key, version, _ := PeekHeader(frame)
		req := kmsg.RequestForKey(key)
		if req == nil || !Supported(key, version) {
			return
		}
		req.SetVersion(version)
		_, body, err := ParseRequestHeader(frame, req.IsFlexible())
		if err != nil {
			return
		}
		if len(body) > len(frame) {
			t.Fatal("body longer than frame")
		}
		_ = req.ReadFrom(body)
	})
}

func TestFrameBufferPool(t *testing.T) {
	for _, n := range []int{1, 8, 4096, 4097, 5121, 1 << 20, 1<<20 + 1, 16 << 20, 16<<20 + 1, 65 << 20} {
		b := GetFrameBuffer(n)
		if len(b) != n {
			t.Fatalf("GetFrameBuffer(%d): len %d", n, len(b))
		}
		b[n-1] = 7
		PutFrameBuffer(b)
		again := GetFrameBuffer(n)
		if len(again) != n || cap(again) < n {
			t.Fatalf("GetFrameBuffer(%d) after a put: len %d cap %d", n, len(again), cap(again))
		}
		PutFrameBuffer(again)
	}
	// The loop's large allocations may have run collections that emptied
	// the list; a put now is kept.
	PutFrameBuffer(GetFrameBuffer(1 << 20))
	frames.mu.Lock()
	kept := len(frames.free)
	frames.mu.Unlock()
	if kept == 0 || kept > maxFreeFrames {
		t.Fatalf("%d buffers kept", kept)
	}
	// The list never holds more than maxFreeBytes.
	for range maxFreeFrames {
		PutFrameBuffer(make([]byte, 0, 40<<20))
	}
	frames.mu.Lock()
	total := 0
	for _, f := range frames.free {
		total += cap(f)
	}
	frames.mu.Unlock()
	if total > maxFreeBytes {
		t.Fatalf("free list holds %d bytes, more than %d", total, maxFreeBytes)
	}
	// A smaller frame reuses a larger free buffer rather than allocating.
	big := GetFrameBuffer(1 << 20)
	PutFrameBuffer(big)
	if small := GetFrameBuffer(900 << 10); &small[:1][0] != &big[:1][0] && cap(small) < 1<<20 {
		t.Fatalf("a 900 KiB frame got a new buffer of %d bytes", cap(small))
	}
	PutFrameBuffer(make([]byte, 10)) // too small to keep: ignored
	PutFrameBuffer(nil)
	// Collections that find the list unused empty it (the hook runs in
	// the finalizer goroutine, so wait for it).
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		frames.mu.Lock()
		kept := len(frames.free)
		frames.mu.Unlock()
		if kept == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d buffers still kept after collections with no use", kept)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkReadFrame reads a 4 MiB frame (a produce request of the size W1
// sends) into a fresh buffer, as the connection reader did before frames
// were pooled, and into a recycled one.
func BenchmarkReadFrame(b *testing.B) {
	body := make([]byte, 4<<20)
	in := frameOf(body)
	b.Run("fresh", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := ReadFrame(bytes.NewReader(in), nil, DefaultMaxFrameBytes); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pooled", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		r := bytes.NewReader(in)
		for i := 0; i < b.N; i++ {
			r.Reset(in)
			n, err := ReadFrameSize(r, DefaultMaxFrameBytes)
			if err != nil {
				b.Fatal(err)
			}
			buf := GetFrameBuffer(n)
			if err := ReadFrameBody(r, buf); err != nil {
				b.Fatal(err)
			}
			PutFrameBuffer(buf)
		}
	})
}

// TestFrameCap: a new buffer holds its frame with headroom of at most
// maxFrameHeadroom, and the large frames a producer sends up to its request
// limit (W1's vary between about 7 and 8 MB) all get one size of buffer.
func TestFrameCap(t *testing.T) {
	for _, n := range []int{4096, 100 << 10, 1 << 20, 3<<20 + 5, 4 << 20, 7_200_000, 7_999_036, 8 << 20, 64 << 20} {
		c := frameCap(n)
		if c < n || c-n > maxFrameHeadroom+largeFrameAlign {
			t.Errorf("frameCap(%d) = %d", n, c)
		}
		if n < largeFrame && (c%frameBufferAlign != 0 || c-n > maxFrameHeadroom+frameBufferAlign) {
			t.Errorf("frameCap(%d) = %d", n, c)
		}
	}
	if a, b := frameCap(7_200_000), frameCap(7_999_036); a != b || a != 8<<20 {
		t.Errorf("frames of 7.2 and 8.0 MB get buffers of %d and %d bytes, want both %d", a, b, 8<<20)
	}
	if c := frameCap(64 << 20); c > maxPooledFrame+maxPooledFrame/8+frameBufferAlign {
		t.Errorf("the largest pooled frame's buffer (%d bytes) would not be taken back", c)
	}
}
