package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/internal/clientconfig"
	"github.com/sluice-broker/sluice/internal/tlsconfig"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
)

// A read broker that receives a Produce (a producer bootstrapped on the
// wrong listener) forwards it to the partition's leader rather than
// refusing it, and counts it (docs/architecture.md, "Routing"). Write
// brokers send transaction markers to the leaders of other partitions,
// and ElectLeaders and DeleteRecords travel on to the partitions' leaders
// the same way. All of it goes through one Kafka client per broker
// process that reaches the write brokers as any Kafka client would,
// through their inter-broker listener (forwardTarget), speaking the
// security protocol the peer registered for it: TLS with this broker's
// certificate, SASL with its inter-broker credentials
// (docs/security.md, "Between brokers").
type forwarder struct {
	mu     sync.Mutex
	cl     *kgo.Client
	errLog *logLimiter // a client that cannot be built is built again at every forward
}

// shouldForward says whether a produce that failed with err here goes to
// the leader instead: only at a broker without the write role.
func (s *Server) shouldForward(err error) bool {
	return !s.cfg.HasRole("write") && (errors.Is(err, partition.ErrNotLeader) || errors.Is(err, errNotHosted))
}

// forwardTarget is the listener of broker b that inter-broker requests go
// to: the one named inter.broker.listener.name (or by
// security.inter.broker.protocol) if set, else b's first listener of the
// write or mixed view, in the order b lists its listeners. Only those
// views answer Metadata with the write brokers, which the client follows
// to the partitions' leaders; false when b has no such listener.
func forwardTarget(b metastore.Broker, name string) (metastore.Endpoint, bool) {
	for _, ep := range b.Endpoints {
		if ep.View != "write" && ep.View != "mixed" {
			continue
		}
		if name == "" || strings.EqualFold(ep.Name, name) {
			return ep, true
		}
	}
	return metastore.Endpoint{}, false
}

func (s *Server) forwardClient() (*kgo.Client, error) {
	s.fwd.mu.Lock()
	defer s.fwd.mu.Unlock()
	if s.fwd.cl != nil {
		return s.fwd.cl, nil
	}
	name := s.cfg.InterBrokerListener()
	var seeds []string
	var target metastore.Endpoint
	for _, b := range s.catalog.Brokers() {
		if b.Role == metastore.RoleRead {
			continue
		}
		ep, ok := forwardTarget(b, name)
		if !ok {
			continue
		}
		if len(seeds) == 0 {
			target = ep
		} else if ep.SecurityProtocol() != target.SecurityProtocol() {
			// One client speaks one protocol; a peer registered
			// otherwise (mid-migration) is reached through the others'
			// Metadata instead.
			s.log.Warn().Int32("broker", b.ID).Str("listener", ep.Name).Str("protocol", ep.SecurityProtocol()).
				Str("want", target.SecurityProtocol()).Msg("inter-broker listener protocols differ between brokers; not a seed")
			continue
		}
		seeds = append(seeds, net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))))
	}
	if len(seeds) == 0 {
		if name != "" {
			return nil, fmt.Errorf("no write broker is registered with a write or mixed listener named %s", name)
		}
		return nil, errors.New("no write broker is registered")
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("sluice-forward-" + strconv.Itoa(int(s.cfg.NodeID)))}
	sec, err := s.interBrokerOpts(target)
	if err != nil {
		if s.fwd.errLog == nil {
			s.fwd.errLog = everyFewSeconds()
		}
		if n, ok := s.fwd.errLog.allow(); ok {
			s.log.Error().Err(err).Int("times", n).Str("listener", target.Name).Str("protocol", target.SecurityProtocol()).Msg("inter-broker client")
		}
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, sec...)...)
	if err != nil {
		return nil, err
	}
	s.fwd.cl = cl
	return cl, nil
}

// interBrokerOpts are the franz-go options that speak ep's protocol: TLS
// whose client certificate is the key store of this broker's ssl.* keys
// for that listener (reloaded from disk as the listeners' are), and the
// peer's certificate verified against the trust store and the host
// dialled; SASL with sasl.mechanism.inter.broker.protocol.
func (s *Server) interBrokerOpts(ep metastore.Endpoint) ([]kgo.Opt, error) {
	ib, err := s.cfg.InterBroker(ep.Name, ep.SecurityProtocol())
	if err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if ib.UsesTLS() {
		var tc *tls.Config
		if ib.TLS.KeystoreLocation != "" || ib.TLS.KeystoreKey != "" {
			ld, err := tlsconfig.NewLoader(ib.TLS)
			if err != nil {
				return nil, fmt.Errorf("inter-broker listener %s: %w", ib.Listener, err)
			}
			// No server name: franz-go sets each connection's to the
			// host it dials.
			tc = ld.ClientConfig("")
		} else if tc, err = ib.TLS.Client(true); err != nil {
			return nil, fmt.Errorf("inter-broker listener %s: %w", ib.Listener, err)
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if ib.UsesSASL() {
		opts = append(opts, kgo.SASL(clientconfig.SASLMechanism(ib.Mechanism, ib.Username, ib.Password)))
	}
	return opts, nil
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
