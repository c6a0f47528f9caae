package server

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/protocol"
)

// produceStream is a large Produce request handled as it arrives
// (conn.readProduceFrame): stage 1 reads each partition's batch from the
// socket just before it validates and proposes it, and gives the batch's
// buffer back as soon as its one-voter group has written it, so that a
// connection holds about one batch instead of the whole request. Under
// W1 (four producers, each request a 1 MB batch for each of 8
// partitions) whole requests meant four 8 MiB buffers filling at once,
// most of the broker's peak memory.
//
// What differs from a request decoded whole: a request whose bytes turn
// out malformed after its first partitions were proposed closes the
// connection with those partitions written (as a connection lost before
// the answer does; an idempotent producer's retry finds them), and the
// wait for a client quota throttle that began while the request was read
// happens before the next request instead of before this one.
type produceStream struct {
	c   *conn
	wr  *windowReader
	ps  *protocol.ProduceStream
	req *kmsg.ProduceRequest
	rc  *reqCtx
	// batches are the current topic's partitions' buffers
	// (ProduceStream.NextPartition; -1: none).
	batches []int
	// Between partitions the frame's clock stops (frameStart -1), as
	// while it waits for budget room (conn.reserve): the handler's time
	// is not the client's stall.
	start, pausedAt int64
	paused          bool
	read            bool // the whole frame is read (finishRead)
}

// handleProduceStream runs a streamed Produce request (conn.handle for a
// request read as it is handled).
func (c *conn) handleProduceStream(s *produceStream) error {
	if err := c.checkAuth(0); err != nil {
		s.finishRead()
		return err
	}
	ps := s.ps
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(ps.Version)
	req.TransactionID, req.Acks, req.TimeoutMillis = ps.TransactionID, ps.Acks, ps.TimeoutMillis
	s.req = req
	hdr, _, err := protocol.ParseRequestHeader(ps.Frame().Frame, req.IsFlexible())
	if err != nil {
		s.finishRead()
		c.srv.metrics.badRequests.Inc()
		return err
	}
	sl := &slot{done: make(chan struct{}), corrID: hdr.CorrelationID}
	sl.api, sl.start = c.listener.metrics.api(0), time.Now()
	// Waiting for a place among the requests in flight is the broker's
	// time too.
	s.pause()
	c.enqueue(sl)
	rc := &reqCtx{conn: c, hdr: hdr, slot: sl, start: sl.start, split: ps.Frame(), size: ps.Frame().Size}
	s.rc = rc
	sl.api.requests.Inc()
	resp, err := c.srv.dispatchProduce(rc, req, s)
	if err == nil && !s.read {
		err = errMalformed{key: 0, version: ps.Version, err: fmt.Errorf("%w: handled before it was read to its end", protocol.ErrProduceFrame)}
	}
	s.finishRead()
	return c.complete(rc, 0, resp, err)
}

// dispatchProduce is dispatch for a streamed Produce request.
func (s *Server) dispatchProduce(rc *reqCtx, req *kmsg.ProduceRequest, src produceSource) (resp kmsg.Response, err error) {
	defer rc.containPanic("request handler panicked: closing its connection", func(p any) {
		resp, err = nil, errHandlerPanic{key: 0, p: p}
	})
	return s.produce(rc, req, src)
}

func (s *produceStream) pause() {
	if s.paused || s.read {
		return
	}
	s.paused, s.pausedAt = true, s.c.srv.now()
	s.start = s.c.frameStart.Swap(-1)
}

func (s *produceStream) resume() {
	if !s.paused {
		return
	}
	s.paused = false
	waited := s.c.srv.now() - s.pausedAt
	s.c.waited.Add(waited)
	s.c.progress.Add(1) // the broker's time, not the client's stall
	s.c.frameStart.Store(s.start + waited)
}

// finishRead ends the frame's read (once): what it holds in
// queued.max.request.bytes passes to the request (or is given back
// when there is none), and the connection is between frames again.
func (s *produceStream) finishRead() {
	if s.read {
		return
	}
	s.resume()
	s.read = true
	c := s.c
	c.srv.requestBytes.endFrame(c)
	c.frameHeld.Store(0)
	c.frameStart.Store(0)
	c.lastActive.Store(c.srv.now())
	c.spoke.Store(true)
	s.ps.Frame() // the buffers as they are now, for releaseFrame
	if s.rc != nil {
		s.rc.held.Add(s.wr.held)
	} else {
		c.srv.requestBytes.release(s.wr.held)
	}
}

func (s *produceStream) topic(int) (*kmsg.ProduceRequestTopic, error) {
	s.resume()
	defer s.pause()
	name, id, n, ok, err := s.ps.NextTopic()
	if err != nil || !ok {
		return nil, err
	}
	// What the topic's partitions take decoded, and answered, counts
	// against queued.max.request.bytes before they are allocated, as a
	// decoded request's do (decode_budget.go).
	if limit := s.c.srv.cfg.QueuedMaxRequestBytes; limit > 0 {
		size := sizeProduceTopic + allocBytes(int64(n)*sizeProducePartition) +
			allocBytes(int64(n)*int64(unsafe.Sizeof(kmsg.ProduceResponseTopicPartition{})))
		got, err := s.c.srv.requestBytes.grow(s.c.ctx, size, limit, s.c)
		s.wr.held += got
		if err != nil {
			return nil, err
		}
	}
	s.req.Topics = append(s.req.Topics, kmsg.ProduceRequestTopic{Topic: name, TopicID: id, Partitions: make([]kmsg.ProduceRequestTopicPartition, n)})
	s.batches = s.batches[:0]
	return &s.req.Topics[len(s.req.Topics)-1], nil
}

func (s *produceStream) partition(rt *kmsg.ProduceRequestTopic, i int) error {
	s.resume()
	defer s.pause()
	part, records, batch, err := s.ps.NextPartition()
	if err != nil {
		return err
	}
	rt.Partitions[i] = kmsg.ProduceRequestTopicPartition{Partition: part, Records: records}
	s.batches = append(s.batches, batch)
	return nil
}

func (s *produceStream) written(rt *kmsg.ProduceRequestTopic, i int) {
	if b := s.batches[i]; b >= 0 {
		rt.Partitions[i].Records = nil
		s.ps.ReleaseBatch(b)
		s.batches[i] = -1
	}
}

func (s *produceStream) done() error {
	s.resume()
	err := s.ps.Finish()
	s.finishRead()
	return err
}
