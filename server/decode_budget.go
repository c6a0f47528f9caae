package server

import (
	"reflect"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A request's decoded form counts against queued.max.request.bytes too, not
// only its frame. kmsg refuses an array whose declared count times its
// element's smallest encoding is more than the bytes left, but a small
// encoding can still decode into much more memory: an empty topic name
// is 2 bytes on the wire and a 48-byte element plus a string header in
// memory, an unknown tagged field 3 bytes and a map entry (a map of its
// own, 336 bytes, in each element of an array). Hostile frames of every
// API at every version (decode_budget_test.go) allocate at most 77 times
// their size while decoding, counting the garbage of a growing map.
//
// So before a request is decoded it reserves an upper bound of what the
// decoding may allocate, with the frame's bytes, waiting for room as a
// frame does:
//   - Produce: what its topics and partitions decode to, counted by
//     walking the frame (produceDecodedSize); its records are not copied
//     (they alias the frame).
//   - any other request: decodeFactor times its size plus decodeBase.
//
// A request whose bound is more than the whole of queued.max.request.bytes
// closes its connection, as a frame over socket.request.max.bytes does,
// and is never decoded (a request other than Produce of more than about
// 1 MiB with the default bound), unless it is at most 64 KiB: like a
// frame of that size it is then decoded whatever the bound (as a large
// one, below), so a tiny configured bound still serves every request. Memory for requests is therefore bounded
// by queued.max.request.bytes, plus the one frame allowed past it, plus
// one decode of at most max(queued.max.request.bytes, 96 x 64 KiB).
//
// A request whose bound is more than an eighth of the limit does not
// reserve it: such requests are decoded one at a time (Server.largeDecode),
// and each charges what it measures once decoded before the next starts
// (conn.decode). Hostile requests, each reserving most of the limit, would
// otherwise fill it between them while they decode and leave other
// clients' small requests waiting for room.
//
// Once decoded, a request larger than decodeWalkMin is measured
// (decodedSize) and keeps only what it holds; the rest of the reservation
// is given back at once, so a long-polling Fetch holds its own size, not
// the bound.
const (
	decodeFactor = 96
	decodeBase   = 1 << 10
	// decodeWalkMin: a bound up to this (requests up to about 75
	// bytes) is kept as it is rather than measured.
	decodeWalkMin = 8 << 10
)

// decodeBound is what decoding body, a request of key at version, may
// allocate at most; exact reports that it was counted from the frame
// (Produce) and is not worth measuring down.
func decodeBound(key, version int16, body []byte) (n int64, exact bool) {
	if key == 0 {
		if n, ok := produceDecodedSize(version, body); ok {
			return n, true
		}
	}
	return decodeFactor*int64(len(body)) + decodeBase, false
}

// Sizes of kmsg's Produce structures, as decodedSize counts them.
var (
	sizeProduceRequest   = int64(reflect.TypeFor[kmsg.ProduceRequest]().Size())
	sizeProduceTopic     = int64(reflect.TypeFor[kmsg.ProduceRequestTopic]().Size())
	sizeProducePartition = int64(reflect.TypeFor[kmsg.ProduceRequestTopicPartition]().Size())
)

// tagMapBytes and tagEntryBytes are what decodedSize counts for a map of
// unknown tagged fields and for each of its entries past the eighth: what
// decoding allocates for them (a map with its first group of eight slots,
// and an entry's share of the tables the map grows through), measured by
// TestDecodeBoundHostileFrames. Legitimate requests carry none.
const (
	tagMapBytes   = 336
	tagEntryBytes = 180
)

// tagsBytes is what a map of n unknown tagged fields counts.
func tagsBytes(n int64) int64 {
	if n == 0 {
		return 0
	}
	return tagMapBytes + max(n-8, 0)*tagEntryBytes
}

// allocBytes is what the runtime allocates for n bytes: small sizes round
// up to a size class (at most an eighth more), large ones to whole 8 KiB
// pages.
func allocBytes(n int64) int64 {
	if n <= 32<<10 {
		return n + n/8
	}
	return (n + 8191) &^ 8191
}

// produceDecodedSize walks a Produce request body (kmsg's ProduceRequest
// layout at version) and returns what decoding it allocates, counted from
// its topics, partitions, names and tags (at least what decodedSize
// reports once it is decoded), without decoding it. ok is false if the
// body does not parse; kmsg then refuses it too.
func produceDecodedSize(version int16, body []byte) (int64, bool) {
	flexible := version >= 9
	b := kbin.Reader{Src: body}
	n := sizeProduceRequest + decodeBase
	arrayLen := func() int32 {
		if flexible {
			return b.CompactArrayLen()
		}
		return b.ArrayLen()
	}
	tags := func() {
		if !flexible {
			return
		}
		k := b.Uvarint()
		n += tagsBytes(int64(k))
		for ; k > 0 && b.Ok(); k-- {
			b.Uvarint()
			b.Span(int(b.Uvarint()))
		}
	}
	if version >= 3 {
		var id *string
		if flexible {
			id = b.UnsafeCompactNullableString()
		} else {
			id = b.UnsafeNullableString()
		}
		if id != nil {
			n += allocBytes(int64(reflect.TypeFor[string]().Size())) + allocBytes(int64(len(*id)))
		}
	}
	b.Int16()
	b.Int32()
	nt := arrayLen()
	if !b.Ok() || int64(nt) > int64(len(b.Src)) {
		return 0, false
	}
	n += allocBytes(max(int64(nt), 0) * sizeProduceTopic)
	for range max(nt, 0) {
		if version <= 12 {
			var s string
			if flexible {
				s = b.UnsafeCompactString()
			} else {
				s = b.UnsafeString()
			}
			n += allocBytes(int64(len(s)))
		} else {
			b.Uuid()
		}
		np := arrayLen()
		if !b.Ok() || int64(np) > int64(len(b.Src)) {
			return 0, false
		}
		n += allocBytes(max(int64(np), 0) * sizeProducePartition)
		for range max(np, 0) {
			b.Int32()
			if flexible {
				b.CompactNullableBytes()
			} else {
				b.NullableBytes()
			}
			tags()
		}
		tags()
		if !b.Ok() {
			return 0, false
		}
	}
	tags()
	return n, b.Ok()
}

// decodedSize is the memory a decoded kmsg request holds beyond its frame:
// its struct, the backing arrays of its slices (byte slices excepted:
// kmsg makes them alias the frame), the bytes of its strings (copied out
// of the frame), what its pointers point to and its unknown tags.
func decodedSize(req kmsg.Request) int64 {
	v := reflect.ValueOf(req).Elem()
	return int64(v.Type().Size()) + planOf(v.Type()).beyond(v)
}

// sizePlan says where, in a value of one type, memory beyond the value
// itself can be: which fields to visit, what a slice's or pointer's
// elements are. A nil plan: nowhere. Built once per type (planOf).
type sizePlan struct {
	kind     reflect.Kind
	elemSize int64      // slice, array and pointer elements
	elem     *sizePlan  // slice, array and pointer elements; nil: nothing beyond
	fields   []sizeStep // struct fields with something beyond
}

type sizeStep struct {
	index int
	plan  *sizePlan
}

var sizePlans sync.Map // reflect.Type -> *sizePlan

func planOf(t reflect.Type) *sizePlan {
	if p, ok := sizePlans.Load(t); ok {
		return p.(*sizePlan)
	}
	p := buildPlan(t, map[reflect.Type]bool{})
	sizePlans.Store(t, p)
	return p
}

func buildPlan(t reflect.Type, seen map[reflect.Type]bool) *sizePlan {
	if seen[t] {
		return nil // kmsg's types do not recurse; be safe if one does
	}
	seen[t] = true
	defer delete(seen, t)
	switch t.Kind() {
	case reflect.String, reflect.Map:
		return &sizePlan{kind: t.Kind()}
	case reflect.Pointer:
		return &sizePlan{kind: t.Kind(), elemSize: int64(t.Elem().Size()), elem: buildPlan(t.Elem(), seen)}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		return &sizePlan{kind: t.Kind(), elemSize: int64(t.Elem().Size()), elem: buildPlan(t.Elem(), seen)}
	case reflect.Array:
		if e := buildPlan(t.Elem(), seen); e != nil {
			return &sizePlan{kind: t.Kind(), elem: e}
		}
	case reflect.Struct:
		var steps []sizeStep
		for i := range t.NumField() {
			if p := buildPlan(t.Field(i).Type, seen); p != nil {
				steps = append(steps, sizeStep{i, p})
			}
		}
		if steps != nil {
			return &sizePlan{kind: t.Kind(), fields: steps}
		}
	}
	return nil
}

// beyond is what v, of p's type, holds outside its own size.
func (p *sizePlan) beyond(v reflect.Value) int64 {
	if p == nil {
		return 0
	}
	switch p.kind {
	case reflect.String:
		return int64(v.Len())
	case reflect.Map:
		return tagsBytes(int64(v.Len()))
	case reflect.Pointer:
		if v.IsNil() {
			return 0
		}
		return p.elemSize + p.elem.beyond(v.Elem())
	case reflect.Slice:
		n := int64(v.Cap()) * p.elemSize
		if p.elem != nil {
			for i := range v.Len() {
				n += p.elem.beyond(v.Index(i))
			}
		}
		return n
	case reflect.Array:
		var n int64
		for i := range v.Len() {
			n += p.elem.beyond(v.Index(i))
		}
		return n
	case reflect.Struct:
		var n int64
		for _, f := range p.fields {
			n += f.plan.beyond(v.Field(f.index))
		}
		return n
	}
	return 0
}
