package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SplitBatchMin is the smallest records field ReadProduceFrame reads into
// a buffer of its own; smaller ones stay in the frame.
const SplitBatchMin = 64 << 10

// smallProduceFrame is the first capacity of a split Produce frame's
// buffer for its other fields; below minPooledFrame, so it never enters
// the pool.
const smallProduceFrame = 2 << 10

// ErrProduceFrame: a Produce frame whose structure ends before its size
// prefix says, or whose fields claim more bytes than it has.
var ErrProduceFrame = errors.New("protocol: malformed produce frame")

// ProduceFrame is a Produce request frame read by ReadProduceFrame: Frame
// holds the header and every field but the large records fields, each of
// which is in a buffer of its own (Batches, from GetFrameBuffer).
type ProduceFrame struct {
	// Frame is the request as it came, except that each records field
	// of at least SplitBatchMin bytes is empty in it: it decodes as the
	// whole frame would, and Attach puts the records back.
	Frame []byte
	// Batches are the records fields taken out, in the order they came.
	Batches []SplitBatch
	// Size is the frame's length as sent.
	Size int
}

// SplitBatch is one records field taken out of a Produce frame: the n-th
// partition of the request, in the order partitions come (topic by topic).
type SplitBatch struct {
	Partition int
	Records   []byte
}

// Release gives the frame's buffers back to the pool (PutFrameBuffer);
// nothing may reference them afterwards.
func (f *ProduceFrame) Release() {
	if f.Frame != nil {
		PutFrameBuffer(f.Frame)
		f.Frame = nil
	}
	for i := range f.Batches {
		PutFrameBuffer(f.Batches[i].Records)
		f.Batches[i].Records = nil
	}
	f.Batches = f.Batches[:0]
}

// Attach puts the records taken out of the frame back into req, decoded
// from f.Frame.
func (f *ProduceFrame) Attach(req *kmsg.ProduceRequest) error {
	n, next := 0, 0
	for i := range req.Topics {
		ps := req.Topics[i].Partitions
		for j := range ps {
			if next < len(f.Batches) && f.Batches[next].Partition == n {
				ps[j].Records = f.Batches[next].Records
				next++
			}
			n++
		}
	}
	if next != len(f.Batches) {
		return fmt.Errorf("%w: %d records fields taken out, %d put back", ErrProduceFrame, len(f.Batches), next)
	}
	return nil
}

// ReadProduceFrame reads the n-byte body of a Produce request (of the
// version in its header; flexible from v9) from r, as ReadFrameBody
// would, except that the memory follows the fields: each records field of
// at least SplitBatchMin bytes goes into a buffer of its own
// (GetFrameBuffer of its size) and the rest into a frame that grows as it
// arrives. Only the structure is checked here (lengths within the frame);
// the fields are decoded from Frame as usual. Bytes after the request's
// last field are read and dropped, as a decoder ignores them. On error
// every buffer taken is given back.
func ReadProduceFrame(r io.Reader, n int) (*ProduceFrame, error) {
	s := NewProduceStream(r, n)
	if err := s.ReadPrefix(); err != nil {
		s.f.Release()
		return nil, err
	}
	return s.ReadAll()
}

// ProduceStream reads a Produce request as it arrives: its header and
// the fields before the topics (ReadPrefix), then each topic
// (NextTopic) and each of its partitions (NextPartition), each
// partition's records in a buffer of its own, then the end (Finish).
// A handler can so deal with each batch while the next one is still on
// its way, and give it back once it is written: a connection then holds
// about one batch rather than the whole request (about 8 MB from
// producers that fill a request with a 1 MB batch per partition).
// Alternatively ReadAll reads the rest into a ProduceFrame to decode.
type ProduceStream struct {
	p produceReader
	f ProduceFrame

	Version       int16
	TransactionID *string
	Acks          int16
	TimeoutMillis int32

	topicsLeft int  // topics not begun
	begun      bool // a topic was begun: its tagged fields are still to come
	partsLeft  int  // partitions of the current topic not read
	flexible   bool
	stream     bool // NextTopic was called: records each in a buffer of their own
}

// NewProduceStream reads the n-byte body of a Produce request from r.
func NewProduceStream(r io.Reader, n int) *ProduceStream {
	s := &ProduceStream{p: produceReader{r: r, left: n}}
	// The fields other than large batches are a few hundred bytes:
	// a small plain buffer to start with (below minPooledFrame, so it
	// never enters the pool), grown when a frame of many small batches
	// outgrows it.
	s.p.out = make([]byte, 0, min(n, smallProduceFrame))
	s.f.Size = n
	return s
}

// Streamable reports whether the request, its prefix read, can be
// handled as it arrives: acks 1 or -1 and no transactional id. Any other
// request needs all its partitions before the first is handled (an
// error answered for every one, or a transaction's partitions added at
// once), so it is read whole (ReadAll).
func (s *ProduceStream) Streamable() bool {
	return (s.Acks == 1 || s.Acks == -1) && s.TransactionID == nil
}

// Frame returns what has been read of the frame, large batches left out
// (ProduceFrame), and the batches. Release it once nothing reads them.
func (s *ProduceStream) Frame() *ProduceFrame {
	s.f.Frame = s.p.out
	s.f.Batches = s.p.batches
	return &s.f
}

// ReadPrefix reads the request header and the fields before the topics.
// Frame().Frame then starts with the whole request header.
func (s *ProduceStream) ReadPrefix() error {
	p := &s.p
	if err := p.copy(8); err != nil { // key, version, correlation id
		return err
	}
	s.Version = int16(binary.BigEndian.Uint16(p.out[2:]))
	s.flexible = s.Version >= 9
	if _, _, err := p.str(false); err != nil { // client id
		return err
	}
	if s.flexible {
		if err := p.tags(); err != nil {
			return err
		}
	}
	if s.Version >= 3 {
		at, l, err := p.str(s.flexible)
		if err != nil {
			return err
		}
		if l >= 0 {
			id := string(p.out[at : at+l])
			s.TransactionID = &id
		}
	}
	if err := p.copy(2 + 4); err != nil {
		return err
	}
	s.Acks = int16(binary.BigEndian.Uint16(p.out[len(p.out)-6:]))
	s.TimeoutMillis = int32(binary.BigEndian.Uint32(p.out[len(p.out)-4:]))
	topics, err := p.arrayLen(s.flexible)
	if err == nil && topics*2 > p.left { // as a decoder checks it
		err = fmt.Errorf("%w: %d topics in %d bytes", ErrProduceFrame, topics, p.left)
	}
	s.topicsLeft = topics
	return err
}

// NextTopic reads the next topic's name (up to v12) or id (v13) and its
// partition count; ok is false after the last one.
func (s *ProduceStream) NextTopic() (name string, id [16]byte, partitions int, ok bool, err error) {
	s.stream = true
	if s.partsLeft > 0 {
		return "", id, 0, false, fmt.Errorf("%w: topic begun before its partitions were read", ErrProduceFrame)
	}
	if s.topicsLeft == 0 {
		return "", id, 0, false, nil
	}
	if err := s.endTopic(); err != nil {
		return "", id, 0, false, err
	}
	s.topicsLeft--
	p := &s.p
	if s.Version >= 13 {
		if err := p.copy(16); err != nil {
			return "", id, 0, false, err
		}
		copy(id[:], p.out[len(p.out)-16:])
	} else {
		at, l, err := p.str(s.flexible)
		if err != nil {
			return "", id, 0, false, err
		}
		if l < 0 { // a topic's name is not nullable: a decoder refuses it
			return "", id, 0, false, fmt.Errorf("%w: a null topic name", ErrProduceFrame)
		}
		name = string(p.out[at : at+l])
	}
	s.partsLeft, err = p.arrayLen(s.flexible)
	if err == nil && s.partsLeft*6 > p.left { // as a decoder checks it
		err = fmt.Errorf("%w: %d partitions in %d bytes", ErrProduceFrame, s.partsLeft, p.left)
	}
	s.begun = true
	return name, id, s.partsLeft, err == nil, err
}

// endTopic reads the tagged fields that end the previous topic, if any.
func (s *ProduceStream) endTopic() error {
	if !s.begun {
		return nil
	}
	s.begun = false
	if s.flexible {
		return s.p.tags()
	}
	return nil
}

// NextPartition reads the current topic's next partition: its index and
// its records (nil when null or empty), in a buffer of their own that is
// Batches()[batch] (batch < 0: no buffer).
func (s *ProduceStream) NextPartition() (partition int32, records []byte, batch int, err error) {
	if s.partsLeft == 0 {
		return 0, nil, -1, fmt.Errorf("%w: no partition left in the topic", ErrProduceFrame)
	}
	s.partsLeft--
	p := &s.p
	if err := p.copy(4); err != nil {
		return 0, nil, -1, err
	}
	partition = int32(binary.BigEndian.Uint32(p.out[len(p.out)-4:]))
	before := len(p.batches)
	if err := p.records(s.flexible, 0); err != nil {
		return 0, nil, -1, err
	}
	batch = -1
	if p.lastLen == 0 {
		records = []byte{} // empty, not null: as a decoder gives it
	}
	if len(p.batches) > before {
		batch = before
		records = p.batches[before].Records
	}
	if s.flexible {
		if err := p.tags(); err != nil {
			return 0, nil, -1, err
		}
	}
	return partition, records, batch, nil
}

// ReleaseBatch gives batch i's buffer back to the pool at once; nothing
// may reference it afterwards.
func (s *ProduceStream) ReleaseBatch(i int) {
	if b := s.p.batches[i].Records; b != nil {
		PutFrameBuffer(b)
		s.p.batches[i].Records = nil
	}
}

// Finish reads what follows the last partition: every topic must have
// been read.
func (s *ProduceStream) Finish() error {
	if s.topicsLeft > 0 || s.partsLeft > 0 {
		return fmt.Errorf("%w: request ended before its topics were read", ErrProduceFrame)
	}
	if err := s.endTopic(); err != nil {
		return err
	}
	return s.p.end(s.flexible)
}

// ReadAll reads the rest of the request after ReadPrefix into a
// ProduceFrame (records of SplitBatchMin bytes or more in buffers of
// their own) to decode; on error every buffer taken is given back.
func (s *ProduceStream) ReadAll() (*ProduceFrame, error) {
	err := s.readAll()
	f := s.Frame()
	if err != nil {
		f.Release()
		return nil, err
	}
	return f, nil
}

func (s *ProduceStream) readAll() error {
	p := &s.p
	for ; s.topicsLeft > 0; s.topicsLeft-- {
		var err error
		if s.Version >= 13 {
			err = p.copy(16)
		} else {
			_, _, err = p.str(s.flexible)
		}
		if err != nil {
			return err
		}
		parts, err := p.arrayLen(s.flexible)
		if err != nil {
			return err
		}
		for range parts {
			if err := p.copy(4); err != nil {
				return err
			}
			if err := p.records(s.flexible, SplitBatchMin); err != nil {
				return err
			}
			if s.flexible {
				if err := p.tags(); err != nil {
					return err
				}
			}
		}
		if s.flexible {
			if err := p.tags(); err != nil {
				return err
			}
		}
	}
	return p.end(s.flexible)
}

type produceReader struct {
	r       io.Reader
	left    int // bytes of the frame not read yet
	out     []byte
	batches []SplitBatch
	fields  int   // records fields read so far
	lastLen int64 // the last records field's length (-1: null)
}

// end reads the request's tagged fields and drops what follows them.
func (p *produceReader) end(flexible bool) error {
	if flexible {
		if err := p.tags(); err != nil {
			return err
		}
	}
	if p.left > 0 {
		if _, err := io.CopyN(io.Discard, p.r, int64(p.left)); err != nil {
			return eof(err)
		}
		p.left = 0
	}
	return nil
}

func eof(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// copy reads k bytes of the frame into out.
func (p *produceReader) copy(k int) error {
	if k < 0 || k > p.left {
		return fmt.Errorf("%w: a field of %d bytes with %d left", ErrProduceFrame, k, p.left)
	}
	if len(p.out)+k > cap(p.out) {
		// Doubling, from SplitBatchMin, up to what the rest of the
		// frame could need. The old buffer is left to the collector:
		// a string read from it may still alias it.
		grown := GetFrameBuffer(min(len(p.out)+p.left, max(2*cap(p.out), len(p.out)+k, SplitBatchMin)))
		copy(grown, p.out)
		p.out = grown[:len(p.out)]
	}
	at := len(p.out)
	p.out = p.out[:at+k]
	if _, err := io.ReadFull(p.r, p.out[at:]); err != nil {
		p.out = p.out[:at]
		return eof(err)
	}
	p.left -= k
	return nil
}

// uvarint reads an unsigned varint into out and returns it.
func (p *produceReader) uvarint() (uint64, error) {
	var v uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if err := p.copy(1); err != nil {
			return 0, err
		}
		c := p.out[len(p.out)-1]
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: varint too long", ErrProduceFrame)
}

// str copies a (nullable) string, compact when flexible, and returns
// where its bytes are in out and how many (-1: null).
func (p *produceReader) str(flexible bool) (at, l int, err error) {
	if !flexible {
		if err := p.copy(2); err != nil {
			return 0, 0, err
		}
		l = int(int16(binary.BigEndian.Uint16(p.out[len(p.out)-2:])))
	} else {
		u, err := p.uvarint()
		if err != nil {
			return 0, 0, err
		}
		if u-1 > uint64(p.left) && u > 0 {
			return 0, 0, fmt.Errorf("%w: a string of %d bytes with %d left", ErrProduceFrame, u-1, p.left)
		}
		l = int(u) - 1
	}
	at = len(p.out)
	if l > 0 {
		err = p.copy(l)
		at = len(p.out) - l
	}
	return at, max(l, -1), err
}

// arrayLen copies an array length and returns it (0 for a null array).
func (p *produceReader) arrayLen(flexible bool) (int, error) {
	var l int64
	if flexible {
		u, err := p.uvarint()
		if err != nil {
			return 0, err
		}
		l = int64(u) - 1
	} else {
		if err := p.copy(4); err != nil {
			return 0, err
		}
		l = int64(int32(binary.BigEndian.Uint32(p.out[len(p.out)-4:])))
	}
	// Each element takes at least a byte: a longer array cannot be in
	// the frame (the decoder refuses it too).
	if l > int64(p.left) {
		return 0, fmt.Errorf("%w: an array of %d elements with %d bytes left", ErrProduceFrame, l, p.left)
	}
	return int(max(l, 0)), nil
}

// tags copies a tagged-fields section.
func (p *produceReader) tags() error {
	n, err := p.uvarint()
	if err != nil {
		return err
	}
	if n > uint64(p.left) {
		return fmt.Errorf("%w: %d tagged fields with %d bytes left", ErrProduceFrame, n, p.left)
	}
	for range n {
		if _, err := p.uvarint(); err != nil { // tag
			return err
		}
		size, err := p.uvarint()
		if err != nil {
			return err
		}
		if size > uint64(p.left) {
			return fmt.Errorf("%w: a tagged field of %d bytes with %d left", ErrProduceFrame, size, p.left)
		}
		if err := p.copy(int(size)); err != nil {
			return err
		}
	}
	return nil
}

// records copies a nullable bytes field, or, from split bytes, reads it
// into a buffer of its own and leaves an empty field in out.
func (p *produceReader) records(flexible bool, split int) error {
	field := p.fields
	p.fields++
	var l int64
	at := len(p.out)
	if flexible {
		u, err := p.uvarint()
		if err != nil {
			return err
		}
		l = int64(u) - 1
	} else {
		if err := p.copy(4); err != nil {
			return err
		}
		l = int64(int32(binary.BigEndian.Uint32(p.out[at:])))
	}
	if l > int64(p.left) {
		return fmt.Errorf("%w: records of %d bytes with %d left", ErrProduceFrame, l, p.left)
	}
	p.lastLen = l
	if l <= 0 || l < int64(split) {
		if l > 0 {
			return p.copy(int(l))
		}
		return nil
	}
	// An empty field in place of the records.
	p.out = p.out[:at]
	if flexible {
		p.out = append(p.out, 1)
	} else {
		p.out = append(p.out, 0, 0, 0, 0)
	}
	b := GetFrameBuffer(int(l))
	if _, err := io.ReadFull(p.r, b); err != nil {
		PutFrameBuffer(b)
		return eof(err)
	}
	p.left -= int(l)
	p.batches = append(p.batches, SplitBatch{Partition: field, Records: b})
	return nil
}
