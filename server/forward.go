package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
)

// A read broker that receives a Produce (a producer bootstrapped on the
// wrong listener) forwards it to the partition's leader rather than
// refusing it, and counts it (docs/architecture.md, "Routing"). It
// reaches the write brokers as any Kafka client would, through their
// write (or mixed) listeners, with one client per broker process.
type forwarder struct {
	mu sync.Mutex
	cl *kgo.Client
}

// shouldForward says whether a produce that failed with err here goes to
// the leader instead: only at a broker without the write role.
func (s *Server) shouldForward(err error) bool {
	return !s.cfg.HasRole("write") && (errors.Is(err, partition.ErrNotLeader) || errors.Is(err, errNotHosted))
}

func (s *Server) forwardClient() (*kgo.Client, error) {
	s.fwd.mu.Lock()
	defer s.fwd.mu.Unlock()
	if s.fwd.cl != nil {
		return s.fwd.cl, nil
	}
	var seeds []string
	for _, b := range s.catalog.Brokers() {
		if b.Role == metastore.RoleRead {
			continue
		}
		for _, ep := range b.Endpoints {
			if ep.View == "write" || ep.View == "mixed" {
				seeds = append(seeds, net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))))
				break
			}
		}
	}
	if len(seeds) == 0 {
		return nil, errors.New("no write broker is registered")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("sluice-forward-"+strconv.Itoa(int(s.cfg.NodeID))))
	if err != nil {
		return nil, err
	}
	s.fwd.cl = cl
	return cl, nil
}

func (s *Server) closeForwarder() {
	s.fwd.mu.Lock()
	defer s.fwd.mu.Unlock()
	if s.fwd.cl != nil {
		s.fwd.cl.Close()
		s.fwd.cl = nil
	}
}

// forwardTurn gives a request that forwards produce batches its place in
// the connection's order: it must wait for prev before forwarding and
// close done once its forwards are answered. Forwards run in the
// request's second stage, one goroutine per request, so without the turn
// a producer's pipelined requests (idempotent producers keep up to 5 in
// flight) could reach the leader out of order and be refused with
// OUT_OF_ORDER_SEQUENCE_NUMBER. Called from the read loop (stage 1).
func (c *conn) forwardTurn() (prev <-chan struct{}, done chan struct{}) {
	prev, done = c.fwdTail, make(chan struct{})
	c.fwdTail = done
	return prev, done
}

// awaitTurn waits for the previous forwarding request of the connection;
// false when ctx ends first.
func awaitTurn(ctx context.Context, prev <-chan struct{}) bool {
	if prev == nil {
		return true
	}
	select {
	case <-prev:
		return true
	case <-ctx.Done():
		return false
	}
}

// forwardProduce sends one partition's batch to its leader and copies the
// leader's answer into sp.
func (s *Server) forwardProduce(ctx context.Context, req *kmsg.ProduceRequest, t metastore.Topic, partition int32, records []byte, sp *kmsg.ProduceResponseTopicPartition) {
	s.metrics.forwarded.Inc()
	leader := t.Partitions[partition].Leader
	cl, err := s.forwardClient()
	if err != nil || leader < 0 {
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return
	}
	fr := kmsg.NewPtrProduceRequest()
	fr.Acks, fr.TimeoutMillis, fr.TransactionID = req.Acks, req.TimeoutMillis, req.TransactionID
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = t.Name, t.ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	fr.Topics = append(fr.Topics, rt)
	kresp, err := cl.Broker(int(leader)).Request(ctx, fr)
	if err != nil {
		s.log.Warn().Err(err).Str("topic", t.Name).Int32("partition", partition).Int32("leader", leader).Msg("forwarding produce")
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return
	}
	resp, ok := kresp.(*kmsg.ProduceResponse)
	if !ok || req.Acks == 0 {
		return // acks=0: nobody reads the answer
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		sp.ErrorCode = kerr.UnknownServerError.Code
		sp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("leader %d answered a forwarded produce with %d topics", leader, len(resp.Topics)))
		return
	}
	got := resp.Topics[0].Partitions[0]
	sp.ErrorCode, sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset, sp.ErrorMessage =
		got.ErrorCode, got.BaseOffset, got.LogAppendTime, got.LogStartOffset, got.ErrorMessage
}
