package protocol

import (
	"encoding/binary"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrBadHeader: the request header could not be parsed.
var ErrBadHeader = errors.New("protocol: malformed request header")

// RequestHeader is a parsed request header (v1, or v2 for flexible
// requests). ClientID aliases the frame.
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
}

// ApiVersionsKey is special in two ways: its response header is always v0,
// and an unsupported version is answered, not refused (KIP-511).
const ApiVersionsKey = 18

// PeekHeader reads the fixed part of a request header (key, version,
// correlation id) without knowing whether the request is flexible. The
// caller needs the correlation id to answer even a request it cannot parse.
func PeekHeader(frame []byte) (key, version int16, corrID int32) {
	return int16(binary.BigEndian.Uint16(frame[0:])), int16(binary.BigEndian.Uint16(frame[2:])),
		int32(binary.BigEndian.Uint32(frame[4:]))
}

// ParseRequestHeader parses the header of frame, whose key and version the
// caller has checked. flexible says whether the header is v2 (it carries
// tagged fields). It returns the header and the body that follows it.
func ParseRequestHeader(frame []byte, flexible bool) (RequestHeader, []byte, error) {
	var h RequestHeader
	if len(frame) < 10 {
		return h, nil, ErrBadHeader
	}
	h.Key, h.Version, h.CorrelationID = PeekHeader(frame)
	b := frame[8:]
	n := int16(binary.BigEndian.Uint16(b))
	b = b[2:]
	switch {
	case n == -1:
	case n < -1 || int(n) > len(b):
		return h, nil, ErrBadHeader
	default:
		s := string(b[:n])
		h.ClientID = &s
		b = b[n:]
	}
	if flexible {
		var err error
		if b, err = skipTags(b); err != nil {
			return h, nil, err
		}
	}
	return h, b, nil
}

// skipTags skips a tagged-field section: a uvarint count, then per field a
// uvarint tag, a uvarint size and that many bytes.
func skipTags(b []byte) ([]byte, error) {
	num, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, ErrBadHeader
	}
	b = b[n:]
	for i := uint64(0); i < num; i++ {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, ErrBadHeader
		}
		b = b[n:]
		sz, n := binary.Uvarint(b)
		if n <= 0 || sz > uint64(len(b)-n) {
			return nil, ErrBadHeader
		}
		b = b[n+int(sz):]
	}
	return b, nil
}

// AppendResponse appends a whole response frame (size, header, body) to dst.
// The header is v1 (with an empty tagged-field section) for flexible
// responses, except ApiVersions, whose response header is always v0 so that
// a client can read it before it knows which versions the broker speaks.
func AppendResponse(dst []byte, corrID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corrID))
	if resp.IsFlexible() && resp.Key() != ApiVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
