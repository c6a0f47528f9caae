package server

import (
	"context"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/protocol"
)

// inflateCharge counts one compressed batch's inflation buffer against
// queued.max.request.bytes (the requestBudget frames use), so that
// inflated records, like request frames, cannot grow the broker's memory
// however many connections send compressed batches at once. It is the
// protocol.InflateBudget ValidateRecords reserves through; release gives
// everything back.
type inflateCharge struct {
	b     *requestBudget
	ctx   context.Context
	limit int64
	held  int64
}

// Reserve waits, like a frame, while the budget is full, with one
// exception: an inflation may always proceed when no other one holds
// bytes. Inflations run while their request holds its own frame's bytes,
// so if every holder waited for another's room none would finish; the one
// allowed through bounds the excess to one inflation (at most the topic's
// max.message.bytes plus decoder state).
func (c *inflateCharge) Reserve(n int) error {
	b := c.b
	return b.await(c.ctx, func() bool {
		if b.used-b.past < c.limit || b.inflating == 0 || (b.inflating == 1 && c.held > 0) {
			if c.held == 0 {
				b.inflating++
			}
			b.used += int64(n)
			c.held += int64(n)
			return true
		}
		return false
	})
}

func (c *inflateCharge) release() {
	if c.held == 0 {
		return
	}
	b := c.b
	b.mu.Lock()
	b.inflating--
	b.mu.Unlock()
	b.release(c.held)
	c.held = 0
}

// validateRecords checks a batch's records (protocol.ValidateRecords),
// letting compressed ones inflate to at most maxBytes (the topic's
// max.message.bytes: the records of an uncompressed batch of that size,
// whose 61-byte header is Kafka's record-batch overhead on top) under
// queued.max.request.bytes.
//
// On a compacted topic (keyed) every record must have a key, as Kafka's
// LogValidator requires: a record without one fails the batch with
// protocol.ErrNullKey (INVALID_RECORD).
func (s *Server) validateRecords(ctx context.Context, b protocol.Batch, maxBytes int64, keyed bool) error {
	validate := b.ValidateRecords
	if keyed {
		validate = b.ValidateKeyedRecords
	}
	if b.Compression() == 0 {
		return validate(int(maxBytes), nil)
	}
	limit := s.cfg.QueuedMaxRequestBytes
	if limit <= 0 {
		return validate(int(maxBytes), nil)
	}
	c := &inflateCharge{b: &s.requestBytes, ctx: ctx, limit: limit}
	defer c.release()
	return validate(int(maxBytes), c)
}

// recompress stores b with the topic's compression.type when that names a
// codec other than b's, as Kafka's LogValidator rebuilds such a batch
// (protocol.Batch.Recompress): the records inflate (at most maxBytes, as in
// validateRecords) and the new batch is written under the same
// queued.max.request.bytes charge, given back once it is built; the new
// batch, about the size of the old, then replaces the request's records.
// A result over max.message.bytes is refused (MESSAGE_TOO_LARGE).
func (s *Server) recompress(ctx context.Context, t metastore.Topic, b protocol.Batch, maxBytes int64) (protocol.Batch, error) {
	ct, _ := s.topicConfig(t, "compression.type")
	codec, ok := protocol.CodecOf(ct.value)
	if !ok || codec == b.Compression() {
		return b, nil
	}
	var nb protocol.Batch
	var err error
	if limit := s.cfg.QueuedMaxRequestBytes; limit > 0 {
		c := &inflateCharge{b: &s.requestBytes, ctx: ctx, limit: limit}
		nb, err = b.Recompress(codec, int(maxBytes), c)
		c.release()
	} else {
		nb, err = b.Recompress(codec, int(maxBytes), nil)
	}
	if err != nil {
		return nil, err
	}
	if int64(len(nb)) > maxBytes {
		return nil, errMessageTooLarge
	}
	return nb, nil
}
