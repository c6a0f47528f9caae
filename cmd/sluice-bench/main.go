// Command sluice-bench is a Kafka load generator built on franz-go. It
// produces fixed-size records (at a target rate or as fast as the broker
// takes them) from several producer clients while consumer clients read the
// same topic, and reports throughput, produce-ack latency and end-to-end
// latency (the send time travels in the first 16 bytes of each record value
// and is read back by a consumer in the same process, on the same monotonic
// clock). At a fixed rate a producer that falls behind its schedule (the
// broker holding it back) catches up, and how far behind it was is reported
// as the send delay, as the OpenMessaging Benchmark does. It works against
// any Kafka-compatible broker.
//
// Every run is bounded: by -duration, by -records, and by -max-duration.
// A run ended by -records measures up to the acknowledgement of its last
// record (the producers hand records to their clients faster than they are
// acknowledged), so its throughput counts every record after the warm-up.
// Progress goes to stderr once a second; the last line on stdout is one JSON
// object with the results.
//
//	sluice-bench -brokers 127.0.0.1:9092 -partitions 8 -producers 4 -duration 15s
//
// Against a TLS or SASL listener, -command-config names Kafka's client
// properties file (internal/clientconfig), as kafka-producer-perf-test's
// --command-config does.
//
// -txn-records N makes every producer transactional (a transactional id of
// its own): begin, N records, flush, commit, again; the result adds the
// committed transactions and their latency. -isolation read_committed makes
// the consumers read only committed records.
//
// -share-consumers N drains instead: the topic is prefilled with -prefill
// records, then N share-group consumers (KIP-932, kgo.ShareGroup) accept
// every record; the result's share object has the drain throughput, the
// ShareFetch round trip and, with -broker-pid, the broker's CPU time and
// peak RSS over the drain (share.go).
//
// -producers 0 is the readers-only mode: the run writes nothing, its
// tailing consumers (-consumers) and backlog readers (-backlog-readers)
// read a topic another process writes, for -duration with -warmup left out
// as in any run, and the result has the same shape with the produce
// figures zero. Its tailing consumers measure no end-to-end latency: the
// send times in the values are on the writing process's clock.
//
// Two helper modes measure the loopback TCP ceiling without a broker:
//
//	sluice-bench tcp-sink -addr 127.0.0.1:7000 -duration 5s
//	sluice-bench tcp-source -addr 127.0.0.1:7000 -duration 4s
package main

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/internal/clientconfig"
)

type config struct {
	Brokers     string `json:"brokers"`
	Topic       string `json:"topic"`
	Partitions  int    `json:"partitions"`
	Replication int    `json:"replication"`
	RecordSize  int    `json:"record_size"`
	Acks        string `json:"acks"`
	Idempotent  bool   `json:"idempotent"`
	Compression string `json:"compression"`
	// Keys > 0 gives every record a key, one of Keys in a fixed order
	// (keyFor), and values half pseudo-random, half zeros, so that
	// compaction and compression have the same work on every broker.
	Keys           int64         `json:"keys,omitempty"`
	Linger         time.Duration `json:"linger_ns"`
	Producers      int           `json:"producers"`
	Consumers      int           `json:"consumers"`
	BacklogReaders int           `json:"backlog_readers"`
	BacklogGroups  bool          `json:"backlog_groups"`
	Prefill        int64         `json:"prefill_records"`
	Rate           float64       `json:"rate_records_per_s"`
	Duration       time.Duration `json:"duration_ns"`
	Warmup         time.Duration `json:"warmup_ns"`
	Records        int64         `json:"records"`
	MaxDuration    time.Duration `json:"max_duration_ns"`
	Drain          time.Duration `json:"drain_ns"`
	CreateTopic    bool          `json:"create_topic"`
	Label          string        `json:"label,omitempty"`
	ClientRack     string        `json:"client_rack,omitempty"`
	Quiet          bool          `json:"-"`
	// CommandConfig is a Kafka client properties file (security.protocol,
	// sasl.*, ssl.*; internal/clientconfig), as Kafka's perf tools take it.
	CommandConfig    string `json:"command_config,omitempty"`
	SecurityProtocol string `json:"security_protocol"`
	// TxnRecords > 0: transactional producers, this many records per
	// transaction.
	TxnRecords int    `json:"txn_records,omitempty"`
	Isolation  string `json:"isolation"`
	// ShareConsumers > 0: instead of producing and tailing, drain the
	// prefilled topic with this many share-group consumers (share.go).
	ShareConsumers int `json:"share_consumers,omitempty"`
	// BrokerPID is a local broker's process, whose CPU time and resident
	// set a share drain reports (0: none).
	BrokerPID int `json:"broker_pid,omitempty"`
	// clientOpts are the TLS and SASL options of CommandConfig.
	clientOpts []kgo.Opt
}

// base are the options of every client: the seeds, TLS and SASL.
func (c *config) base(seeds []string) []kgo.Opt {
	opts := append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, c.clientOpts...)
	if c.ClientRack != "" {
		// KIP-392: a broker with a rack-aware replica selector sends the
		// consumer to a replica in this rack.
		opts = append(opts, kgo.Rack(c.ClientRack))
	}
	return opts
}

// base is the origin of the timestamps carried in record values.
var base = time.Now()

func now() int64 { return int64(time.Since(base)) }

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "tcp-sink", "tcp-source":
			if err := runTCP(os.Args[1], os.Args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, "sluice-bench:", err)
				os.Exit(1)
			}
			return
		}
	}
	var c config
	fs := flag.NewFlagSet("sluice-bench", flag.ExitOnError)
	fs.StringVar(&c.Brokers, "brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	fs.StringVar(&c.Topic, "topic", "sluice-bench", "topic (created unless -create-topic=false)")
	fs.IntVar(&c.Partitions, "partitions", 8, "partitions of the topic")
	fs.IntVar(&c.Replication, "replication", 1, "replication factor of the topic")
	fs.IntVar(&c.RecordSize, "record-size", 1024, "record value size in bytes (>= 16: the send and the scheduled time)")
	fs.Int64Var(&c.Keys, "keys", 0, "key cardinality: records get keys k000000000.. in a fixed order and half-random values (0 = no keys, zero-filled values)")
	fs.StringVar(&c.Acks, "acks", "all", "all, 1 or 0")
	fs.BoolVar(&c.Idempotent, "idempotent", true, "idempotent producer (needs acks=all)")
	fs.StringVar(&c.Compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	fs.DurationVar(&c.Linger, "linger", 5*time.Millisecond, "producer linger (the Java client's default since Kafka 4.0 is 5ms)")
	fs.IntVar(&c.Producers, "producers", 1, "producer clients (0 = readers only: read a topic another process writes)")
	fs.IntVar(&c.Consumers, "consumers", 1, "tailing consumer clients, each reading every partition; they measure end-to-end latency")
	fs.IntVar(&c.BacklogReaders, "backlog-readers", 0, "extra consumer clients that start at the end of the warm-up and read every partition from the start")
	fs.BoolVar(&c.BacklogGroups, "backlog-groups", false, "backlog readers are consumer-group members (one group each, reset to the start) instead of direct partition consumers")
	fs.Int64Var(&c.Prefill, "prefill", 0, "records produced (unmeasured) before the run, for backlog readers to catch up on")
	fs.Float64Var(&c.Rate, "rate", 0, "target produce rate in records/s over all producers (0 = as fast as acknowledged)")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long producers send, warm-up included (0 = until -records)")
	fs.DurationVar(&c.Warmup, "warmup", 2*time.Second, "first part of -duration left out of the figures")
	fs.Int64Var(&c.Records, "records", 0, "stop after this many records in all, the window ending with the last acknowledgement (0 = until -duration)")
	fs.DurationVar(&c.MaxDuration, "max-duration", 10*time.Minute, "hard bound on sending time")
	fs.DurationVar(&c.Drain, "drain", 10*time.Second, "how long consumers may take to read the last acknowledged records")
	fs.BoolVar(&c.CreateTopic, "create-topic", true, "create the topic (an existing one is used as it is)")
	fs.StringVar(&c.ClientRack, "client-rack", "", "client.rack of every client (KIP-392 follower fetching on Kafka with a rack-aware replica selector)")
	fs.StringVar(&c.Label, "label", "", "free text copied into the JSON result")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress lines")
	fs.IntVar(&c.TxnRecords, "txn-records", 0, "transactional producers (one transactional id each), this many records per transaction (0 = no transactions)")
	fs.StringVar(&c.Isolation, "isolation", "read_uncommitted", "consumers' isolation level: read_uncommitted or read_committed")
	fs.IntVar(&c.ShareConsumers, "share-consumers", 0, "drain the topic (filled by -prefill) with this many share-group consumers (kgo.ShareGroup, every record accepted) instead of producing and tailing; the result's share object")
	fs.IntVar(&c.BrokerPID, "broker-pid", 0, "with -share-consumers: a local broker's pid, whose CPU time and peak RSS over the drain are reported")
	fs.StringVar(&c.CommandConfig, "command-config", "", "Kafka client properties file for a TLS or SASL listener (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ssl.keystore.location; PEM)")
	fs.Parse(os.Args[1:])

	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var res *result
	var err error
	if c.ShareConsumers > 0 {
		res, err = runShare(ctx, &c)
	} else {
		res, err = run(ctx, &c)
	}
	if res != nil {
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice-bench:", err)
		os.Exit(1)
	}
}

func (c *config) validate() error {
	if c.RecordSize < 16 {
		return errors.New("-record-size must be at least 16 (the send and the scheduled time)")
	}
	if c.Duration <= 0 && c.Records <= 0 {
		return errors.New("need -duration or -records")
	}
	if c.Duration <= 0 || c.Duration > c.MaxDuration {
		c.Duration = c.MaxDuration
	}
	if c.Warmup >= c.Duration {
		return errors.New("-warmup must be shorter than -duration")
	}
	if c.Producers < 0 || c.Consumers < 0 || c.BacklogReaders < 0 || c.Partitions < 1 {
		return errors.New("need at least one partition, and no negative client count")
	}
	if c.Producers == 0 {
		if err := c.validateReadersOnly(); err != nil {
			return err
		}
	}
	switch c.Acks {
	case "all", "-1", "1", "0":
	default:
		return fmt.Errorf("bad -acks %q", c.Acks)
	}
	if c.Acks != "all" && c.Acks != "-1" {
		c.Idempotent = false
	}
	if _, err := codec(c.Compression); err != nil {
		return err
	}
	if _, err := isolation(c.Isolation); err != nil {
		return err
	}
	if c.ShareConsumers < 0 || c.BrokerPID < 0 {
		return errors.New("-share-consumers and -broker-pid must not be negative")
	}
	if c.ShareConsumers > 0 && c.TxnRecords > 0 {
		return errors.New("-share-consumers drains a prefilled topic: no -txn-records")
	}
	if c.TxnRecords < 0 {
		return errors.New("-txn-records must not be negative")
	}
	if c.TxnRecords > 0 && !c.Idempotent {
		return errors.New("-txn-records needs an idempotent producer with acks=all")
	}
	c.SecurityProtocol = clientconfig.Plaintext
	if c.CommandConfig != "" {
		cc, err := clientconfig.Load(c.CommandConfig)
		if err != nil {
			return fmt.Errorf("-command-config %w", err)
		}
		if len(cc.Ignored) > 0 {
			fmt.Fprintf(os.Stderr, "sluice-bench: %s: not used: %s\n", c.CommandConfig, strings.Join(cc.Ignored, ", "))
		}
		if c.clientOpts, err = cc.Opts(); err != nil {
			return fmt.Errorf("-command-config %s: %w", c.CommandConfig, err)
		}
		c.SecurityProtocol = cc.Protocol
	}
	return nil
}

// validateReadersOnly checks a -producers 0 run: readers and a duration,
// nothing that writes.
func (c *config) validateReadersOnly() error {
	switch {
	case c.ShareConsumers > 0:
		return nil // a share drain has no producer clients either
	case c.Consumers+c.BacklogReaders == 0:
		return errors.New("-producers 0 needs -consumers or -backlog-readers")
	case c.Records > 0:
		return errors.New("-producers 0 runs for -duration: no -records")
	case c.Prefill > 0 || c.Rate > 0 || c.TxnRecords > 0:
		return errors.New("-producers 0 writes nothing: no -prefill, -rate or -txn-records")
	}
	return nil
}

func codec(s string) (kgo.CompressionCodec, error) {
	switch s {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("bad -compression %q", s)
}

func isolation(s string) (kgo.IsolationLevel, error) {
	switch s {
	case "read_uncommitted", "":
		return kgo.ReadUncommitted(), nil
	case "read_committed":
		return kgo.ReadCommitted(), nil
	}
	return kgo.IsolationLevel{}, fmt.Errorf("bad -isolation %q (read_uncommitted or read_committed)", s)
}

// counters are shared by every producer or every consumer of one kind.
type counters struct {
	records atomic.Int64
	bytes   atomic.Int64
	errors  atomic.Int64
}

// batchHook counts produced batches and produce requests: records per batch
// and per request are what the broker sees per append and per syscall.
type batchHook struct {
	batches  atomic.Int64
	requests atomic.Int64
	tlsState atomic.Value // string: the TLS version and cipher suite of a producer connection
}

// OnBrokerConnect notes what a TLS connection negotiated, so that a
// comparison of brokers over TLS shows that both used the same cipher.
func (h *batchHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, conn net.Conn, err error) {
	if tc, ok := conn.(*tls.Conn); ok && err == nil {
		cs := tc.ConnectionState()
		h.tlsState.CompareAndSwap(nil, tls.VersionName(cs.Version)+" "+tls.CipherSuiteName(cs.CipherSuite))
	}
}

func (h *batchHook) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, _ kgo.ProduceBatchMetrics) {
	h.batches.Add(1)
}

func (h *batchHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 0 && err == nil { // Produce
		h.requests.Add(1)
	}
}

type result struct {
	Config   config  `json:"config"`
	WindowS  float64 `json:"window_s"`
	ElapsedS float64 `json:"elapsed_s"`
	Produce  struct {
		Records        int64   `json:"records"`
		Bytes          int64   `json:"bytes"`
		TotalRecords   int64   `json:"total_records"`
		TotalBytes     int64   `json:"total_bytes"`
		RecordsPerS    float64 `json:"records_per_s"`
		MBPerS         float64 `json:"mb_per_s"`
		Errors         int64   `json:"errors"`
		FirstError     string  `json:"first_error,omitempty"`
		Batches        int64   `json:"batches"`
		Requests       int64   `json:"requests"`
		RecordsPerReq  float64 `json:"records_per_request"`
		RecordsPerBat  float64 `json:"records_per_batch"`
		PrefillRecords int64   `json:"prefill_records"`
		Ack            summary `json:"ack_latency"`
		SendDelay      summary `json:"send_delay"`
		TLS            string  `json:"tls,omitempty"`
	} `json:"produce"`
	// Txn: transactions committed in the measured window; their latency
	// is from the first record's send to the commit's answer, the commit
	// latency that of EndTransaction alone (after the flush).
	Txn struct {
		Committed int64   `json:"committed"`
		PerS      float64 `json:"per_s"`
		Latency   summary `json:"latency"`
		Commit    summary `json:"commit_latency"`
	} `json:"txn"`
	Consume struct {
		Records     int64   `json:"records"`
		RecordsPerS float64 `json:"records_per_s"`
		MBPerS      float64 `json:"mb_per_s"`
		Missing     int64   `json:"missing"`
		E2E         summary `json:"e2e_latency"`
	} `json:"consume"`
	Backlog struct {
		Records     int64   `json:"records"`
		RecordsPerS float64 `json:"records_per_s"`
		MBPerS      float64 `json:"mb_per_s"`
		// Readers-only runs (-producers 0 -consumers 0): seconds from
		// the backlog readers' start until every one of them had read
		// the whole topic as it stood then (the run ends there), and
		// the bytes they read over that time; 0 when they had not by
		// -duration.
		CaughtUpS      float64 `json:"caught_up_s"`
		CaughtUpMBPerS float64 `json:"caught_up_mb_per_s"`
	} `json:"backlog"`
	Share shareResult `json:"share"`
}

// connect waits for the brokers to answer and creates the topic when
// asked; the caller closes the admin client.
func connect(ctx context.Context, c *config) ([]string, *kgo.Client, *kadm.Client, error) {
	seeds := strings.Split(c.Brokers, ",")
	admCl, err := kgo.NewClient(c.base(seeds)...)
	if err != nil {
		return nil, nil, nil, err
	}
	adm := kadm.NewClient(admCl)
	if err := waitBroker(ctx, adm, time.Minute); err != nil {
		admCl.Close()
		return nil, nil, nil, err
	}
	if c.CreateTopic {
		if err := createTopic(ctx, adm, c); err != nil {
			admCl.Close()
			return nil, nil, nil, err
		}
	}
	return seeds, admCl, adm, nil
}

func run(ctx context.Context, c *config) (*result, error) {
	seeds, admCl, adm, err := connect(ctx, c)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	res := &result{Config: *c}
	var firstErr atomic.Value

	if c.Prefill > 0 {
		if err := prefill(ctx, c, seeds, &firstErr); err != nil {
			return res, err
		}
		res.Produce.PrefillRecords = c.Prefill
	}
	// The producer clients. Transactional ones each commit one transaction
	// of one record first, unmeasured, as the topic is created unmeasured:
	// the first transaction of a broker may have to create its transaction
	// log (Kafka's __transaction_state, 50 partitions) and takes seconds.
	var hook batchHook
	clients := make([]*kgo.Client, c.Producers)
	for i := range clients {
		opts := producerOpts(c, seeds, &hook)
		if c.TxnRecords > 0 {
			opts = append(opts, kgo.TransactionalID(fmt.Sprintf("%s-%d-%d", c.Topic, os.Getpid(), i)))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return res, err
		}
		defer cl.Close()
		clients[i] = cl
	}
	if c.TxnRecords > 0 {
		if err := warmTxns(ctx, clients, c); err != nil {
			return res, err
		}
	}
	// Tailing consumers start exactly at the current end of every partition.
	ends, err := adm.ListEndOffsets(ctx, c.Topic)
	if err != nil {
		return res, fmt.Errorf("list end offsets: %w", err)
	}
	endAt := map[int32]kgo.Offset{}
	startAt := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		endAt[o.Partition] = kgo.NewOffset().At(o.Offset)
		startAt[o.Partition] = kgo.NewOffset().AtStart()
	})
	if len(endAt) != c.Partitions {
		return res, fmt.Errorf("end offsets for %d of %d partitions", len(endAt), c.Partitions)
	}

	// Readers only: the backlog is the topic as it stands when the
	// backlog readers start; the run ends once each has read it.
	var backlogTarget atomic.Int64 // records all backlog readers must read
	var backlogDoneAt atomic.Int64 // monotonic ns since base, once read
	backlogDone := make(chan struct{})
	var backlogStartNs int64
	var (
		prod, cons, back counters
		ackH, e2eH       hist
		delayH           hist // send time behind schedule, fixed rate only
		txnH, commitH    hist // transactional producers only
		txns             atomic.Int64
	)
	start := time.Now()
	warmEnd := start.Add(c.Warmup)
	warmEndNs := int64(warmEnd.Sub(base))
	deadline := start.Add(c.Duration)

	cctx, cancelConsumers := context.WithCancel(ctx)
	defer cancelConsumers()
	var cwg sync.WaitGroup
	// Consumers keep franz-go's fetch defaults (50 MiB per fetch, 1 MiB per
	// partition), which are the Java consumer's too.
	iso, _ := isolation(c.Isolation)
	consumerOpts := func(offsets map[int32]kgo.Offset) []kgo.Opt {
		return append(c.base(seeds),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.Topic: offsets}),
			kgo.FetchIsolationLevel(iso),
		)
	}
	startConsumer := func(offsets map[int32]kgo.Offset, cnt *counters, lat *hist, group string) error {
		opts := consumerOpts(offsets)
		if group != "" {
			opts = append(c.base(seeds),
				kgo.ConsumerGroup(group),
				kgo.ConsumeTopics(c.Topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchIsolationLevel(iso),
			)
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return err
		}
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			defer cl.Close()
			for {
				fetches := cl.PollFetches(cctx)
				if cctx.Err() != nil {
					return
				}
				t := now()
				fetches.EachError(func(_ string, _ int32, err error) {
					if !errors.Is(err, context.Canceled) {
						cnt.errors.Add(1)
						firstErr.CompareAndSwap(nil, "fetch: "+err.Error())
					}
				})
				var n, b int64
				fetches.EachRecord(func(r *kgo.Record) {
					n++
					b += int64(len(r.Value))
					if lat != nil && len(r.Value) >= 16 {
						sent := sentAt(r.Value)
						if sent >= warmEndNs {
							lat.record(time.Duration(t - sent))
						}
					}
				})
				total := cnt.records.Add(n)
				cnt.bytes.Add(b)
				if cnt == &back {
					if want := backlogTarget.Load(); want > 0 && total >= want && backlogDoneAt.CompareAndSwap(0, now()) {
						close(backlogDone)
					}
				}
			}
		}()
		return nil
	}
	// Without producers of its own the run cannot tell a record's send
	// time on its clock: its tailing consumers count records only.
	tailLat := &e2eH
	if c.Producers == 0 {
		tailLat = nil
	}
	for i := 0; i < c.Consumers; i++ {
		if err := startConsumer(endAt, &cons, tailLat, ""); err != nil {
			return res, err
		}
	}

	// Producers.
	var pwg sync.WaitGroup
	pool := sync.Pool{New: func() any { return make([]byte, c.RecordSize) }}
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			prod.errors.Add(1)
			firstErr.CompareAndSwap(nil, "produce: "+err.Error())
		} else {
			// The send time is in the value too (consumers read it there),
			// but the record's own timestamp is in memory the client just
			// touched, while the value was last written when it was sent.
			sent := int64(r.Timestamp.Sub(base))
			if sent >= warmEndNs {
				ackH.record(time.Duration(now() - sent))
			}
			prod.records.Add(1)
			prod.bytes.Add(int64(len(r.Value)))
		}
		pool.Put(r.Value) //nolint:staticcheck // a slice header is fine here
	}
	var budget, seq atomic.Int64
	budget.Store(c.Records)
	perRate := c.Rate / float64(c.Producers)
	for _, cl := range clients {
		pwg.Add(1)
		go func(cl *kgo.Client) {
			defer pwg.Done()
			var i int64
			// A transaction ends with its last record, the budget or the
			// deadline (so every transaction but the last is whole).
			tx := &txnRun{cl: cl, ctx: ctx, n: c.TxnRecords}
			defer func() {
				if _, err := tx.end(); err != nil {
					prod.errors.Add(1)
					firstErr.CompareAndSwap(nil, "transaction: "+err.Error())
				}
			}()
			for {
				if c.Records > 0 && budget.Add(-1) < 0 {
					return
				}
				t := time.Now()
				if !t.Before(deadline) || ctx.Err() != nil {
					return
				}
				if err := tx.begin(); err != nil {
					prod.errors.Add(1)
					firstErr.CompareAndSwap(nil, "transaction: "+err.Error())
					return
				}
				sched := int64(0)
				if perRate > 0 {
					due := start.Add(time.Duration(float64(i) / perRate * 1e9))
					if d := due.Sub(t); d > 0 {
						time.Sleep(d)
					}
					sched = int64(due.Sub(base))
				}
				v := pool.Get().([]byte)
				sent := int64(t.Sub(base))
				if perRate > 0 {
					sent = now() // t is from before the wait
				}
				if sched == 0 {
					sched = sent
				} else if sent >= warmEndNs {
					// Behind schedule: Produce blocked on a full buffer.
					delayH.record(time.Duration(sent - sched))
				}
				binary.LittleEndian.PutUint64(v, uint64(sent))
				binary.LittleEndian.PutUint64(v[8:], uint64(sched))
				n := seq.Add(1) - 1
				fillValue(c, v, n)
				// The timestamp is the send time (the client would read the
				// clock again for it).
				ts := base.Add(time.Duration(sent))
				cl.Produce(ctx, &kgo.Record{Topic: c.Topic, Key: keyFor(c, n), Value: v, Timestamp: ts}, promise)
				i++
				if tx.produced(sent) {
					start := tx.start
					commit, err := tx.end()
					if err != nil {
						prod.errors.Add(1)
						firstErr.CompareAndSwap(nil, "transaction: "+err.Error())
						return
					}
					if start >= warmEndNs && time.Now().Before(deadline) {
						txnH.record(time.Duration(now() - start))
						commitH.record(commit)
						txns.Add(1)
					}
				}
			}
		}(cl)
	}

	// flush waits for the acknowledgement of every record handed to the
	// producers (at most a minute).
	flush := func(clients []*kgo.Client) {
		fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
		defer fcancel()
		for _, cl := range clients {
			if err := cl.Flush(fctx); err != nil {
				firstErr.CompareAndSwap(nil, "flush: "+err.Error())
			}
		}
	}

	// Progress and window snapshots.
	type snap struct{ prod, prodB, cons, consB, back, backB int64 }
	take := func() snap {
		return snap{prod.records.Load(), prod.bytes.Load(), cons.records.Load(), cons.bytes.Load(), back.records.Load(), back.bytes.Load()}
	}
	var atWarm, atEnd snap
	var endTime time.Time
	producersDone := make(chan struct{})
	go func() { pwg.Wait(); close(producersDone) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	warmTimer := time.NewTimer(time.Until(warmEnd))
	endTimer := time.NewTimer(time.Until(deadline))
	prev, prevT := take(), start
	sending := true
	backlogStarted := false
	done := producersDone
	readersOnly := c.Producers == 0 && c.Consumers == 0 && c.BacklogReaders > 0
	if c.Producers == 0 {
		done = nil // readers only: the run ends at -duration
	}
	var caughtUp <-chan struct{}
	var acked chan struct{} // closed once the last record is acknowledged
	for sending {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-warmTimer.C:
			atWarm = take()
			if !backlogStarted {
				backlogStarted = true
				if readersOnly {
					var sum int64
					ends, err := adm.ListEndOffsets(ctx, c.Topic)
					if err != nil {
						return res, fmt.Errorf("list end offsets: %w", err)
					}
					starts, err := adm.ListStartOffsets(ctx, c.Topic)
					if err != nil {
						return res, fmt.Errorf("list start offsets: %w", err)
					}
					ends.Each(func(o kadm.ListedOffset) {
						sum += o.Offset
						if so, ok := starts.Lookup(c.Topic, o.Partition); ok {
							sum -= so.Offset
						}
					})
					if sum > 0 {
						backlogTarget.Store(sum * int64(c.BacklogReaders))
						caughtUp = backlogDone
					}
					backlogStartNs = now()
				}
				for i := 0; i < c.BacklogReaders; i++ {
					group := ""
					if c.BacklogGroups {
						group = fmt.Sprintf("%s-reader-%d-%d", c.Topic, os.Getpid(), i)
					}
					if err := startConsumer(startAt, &back, nil, group); err != nil {
						return res, err
					}
				}
			}
		case <-endTimer.C:
			atEnd, endTime = take(), time.Now()
			sending = false
		case <-done:
			// -records reached before -duration: every record is handed
			// to a client, up to MaxBufferedRecords of them per client
			// not yet acknowledged. The window ends with the last
			// acknowledgement, so that it holds every record it counts
			// (the warm-up may end meanwhile).
			done, acked = nil, make(chan struct{})
			go func() { flush(clients); close(acked) }()
		case <-acked:
			atEnd, endTime = take(), time.Now()
			sending = false
		case <-caughtUp:
			atEnd, endTime = take(), time.Now()
			sending = false
		case t := <-tick.C:
			cur := take()
			dt := t.Sub(prevT).Seconds()
			if !c.Quiet {
				fmt.Fprintf(os.Stderr, "%5.1fs produce %8.0f rec/s %7.1f MB/s | consume %8.0f rec/s | backlog %7.1f MB/s | ack p99 %7.2f ms | e2e p99 %7.2f ms | errors %d\n",
					t.Sub(start).Seconds(), float64(cur.prod-prev.prod)/dt, float64(cur.prodB-prev.prodB)/dt/1e6,
					float64(cur.cons-prev.cons)/dt, float64(cur.backB-prev.backB)/dt/1e6,
					ms(ackH.quantile(0.99)), ms(e2eH.quantile(0.99)), prod.errors.Load()+cons.errors.Load()+back.errors.Load())
			}
			prev, prevT = cur, t
		}
	}
	if atWarm == (snap{}) && endTime.Before(warmEnd) {
		atWarm = snap{} // run ended inside the warm-up: the window is the whole run
		warmEnd = start
	}
	window := endTime.Sub(warmEnd).Seconds()

	// Stop sending, wait for outstanding acks, then let consumers catch up.
	<-producersDone
	flush(clients)
	want := prod.records.Load() * int64(c.Consumers)
	if c.Producers == 0 {
		want = 0 // what another process wrote is not counted here
	}
	drainUntil := time.Now().Add(c.Drain)
	for cons.records.Load() < want && time.Now().Before(drainUntil) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	cancelConsumers()
	cwg.Wait()

	p := &res.Produce
	p.Records = atEnd.prod - atWarm.prod
	p.Bytes = atEnd.prodB - atWarm.prodB
	p.TotalRecords = prod.records.Load() + c.Prefill
	p.TotalBytes = prod.bytes.Load() + c.Prefill*int64(c.RecordSize)
	p.RecordsPerS = round(float64(p.Records)/window, 1)
	p.MBPerS = round(float64(p.Bytes)/window/1e6, 2)
	p.Errors = prod.errors.Load()
	p.Batches = hook.batches.Load()
	p.Requests = hook.requests.Load()
	if p.Requests > 0 {
		p.RecordsPerReq = round(float64(prod.records.Load())/float64(p.Requests), 1)
	}
	if p.Batches > 0 {
		p.RecordsPerBat = round(float64(prod.records.Load())/float64(p.Batches), 1)
	}
	p.Ack = ackH.summary()
	p.SendDelay = delayH.summary()
	if s, ok := hook.tlsState.Load().(string); ok {
		p.TLS = s
	}
	res.Txn.Committed = txns.Load()
	res.Txn.PerS = round(float64(res.Txn.Committed)/window, 1)
	res.Txn.Latency = txnH.summary()
	res.Txn.Commit = commitH.summary()
	cs := &res.Consume
	cs.Records = atEnd.cons - atWarm.cons
	cs.RecordsPerS = round(float64(cs.Records)/window, 1)
	cs.MBPerS = round(float64(atEnd.consB-atWarm.consB)/window/1e6, 2)
	if c.Producers > 0 {
		cs.Missing = want - cons.records.Load()
	}
	cs.E2E = e2eH.summary()
	bk := &res.Backlog
	bk.Records = back.records.Load()
	bk.RecordsPerS = round(float64(atEnd.back-atWarm.back)/window, 1)
	bk.MBPerS = round(float64(atEnd.backB-atWarm.backB)/window/1e6, 2)
	if d := backlogDoneAt.Load(); d > 0 {
		secs := float64(d-backlogStartNs) / 1e9
		bk.CaughtUpS = round(secs, 3)
		bk.CaughtUpMBPerS = round(float64(back.bytes.Load())/secs/1e6, 2)
	}
	res.WindowS = round(window, 3)
	res.ElapsedS = round(time.Since(start).Seconds(), 3)
	if e, ok := firstErr.Load().(string); ok {
		p.FirstError = e
	}
	if p.Errors > 0 || cons.errors.Load() > 0 || back.errors.Load() > 0 {
		return res, fmt.Errorf("%d produce, %d consume errors; first: %v", p.Errors, cons.errors.Load()+back.errors.Load(), p.FirstError)
	}
	if cs.Missing > 0 {
		return res, fmt.Errorf("consumers read %d fewer records than acknowledged within -drain", cs.Missing)
	}
	return res, nil
}

// keyFor is the key of the n-th record sent (nil without -keys): n times
// a large prime modulo the cardinality, so every key recurs in the same
// scattered order on every run and broker.
func keyFor(c *config, n int64) []byte {
	if c.Keys <= 0 {
		return nil
	}
	return fmt.Appendf(nil, "k%09d", (n*2654435761)%c.Keys)
}

// noise is 1 MiB of pseudo-random bytes (a fixed seed): with -keys each
// value takes its first half after the timestamps from it, at a place
// set by the record's number, so values compress about 2:1 on every
// broker alike and no two records of a batch repeat each other.
var noise = func() []byte {
	r := rand.New(rand.NewPCG(1, 7))
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

// fillValue writes the n-th record's noise into v (with -keys).
func fillValue(c *config, v []byte, n int64) {
	if c.Keys <= 0 || len(v) <= 16 {
		return
	}
	half := v[16 : 16+min((len(v)-16)/2, len(noise)/2)]
	at := (n * 7919) % int64(len(noise)-len(half))
	copy(half, noise[at:])
}

// sentAt reads the send time from a record value; bytes 8-16 hold the
// scheduled send time.
func sentAt(v []byte) int64 { return int64(binary.LittleEndian.Uint64(v)) }

func producerOpts(c *config, seeds []string, hook *batchHook) []kgo.Opt {
	cd, _ := codec(c.Compression)
	opts := append(c.base(seeds),
		kgo.DefaultProduceTopic(c.Topic),
		kgo.ProducerBatchCompression(cd),
		kgo.ProducerLinger(c.Linger),
		kgo.MaxBufferedRecords(16<<10),
		kgo.ProduceRequestTimeout(30*time.Second),
		kgo.RecordRetries(5),
	)
	if hook != nil {
		opts = append(opts, kgo.WithHooks(hook))
	}
	switch c.Acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	if !c.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if c.TxnRecords > 0 {
		// A transaction's first produce to a partition whose previous
		// transaction's marker is not written yet is answered
		// CONCURRENT_TRANSACTIONS and retried (Kafka answers EndTxn before
		// writing the markers). franz-go's default back-off, 250 ms
		// doubling to 5 s, made those retries most of a Kafka
		// transaction's time in a trial run; the Java producer's, which a
		// Kafka user meets, is retry.backoff.ms=100 doubling to
		// retry.backoff.max.ms=1000, with 20 % jitter.
		opts = append(opts, kgo.RetryBackoffFn(javaBackoff))
		// franz-go retries a produce error other than a timeout (the
		// CONCURRENT_TRANSACTIONS above, or the NOT_ENOUGH_REPLICAS a
		// broker may answer instead) only after a metadata refresh, and
		// spaces metadata refreshes by MetadataMinAge, 5 s by default: a
		// transaction that met one such error stalled about 5 s (Kafka
		// 4.4, which ends a transaction before its markers are written,
		// met it every few transactions with 4 producers). The Java
		// producer retries these without a metadata refresh, after
		// retry.backoff.ms; the same 100 ms as the floor between
		// refreshes is the nearest franz-go setting.
		opts = append(opts, kgo.MetadataMinAge(100*time.Millisecond))
	}
	return opts
}

// javaBackoff is the Java producer's retry back-off with its defaults.
func javaBackoff(fails int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < fails && d < time.Second; i++ {
		d *= 2
	}
	d = min(d, time.Second)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// prefill writes c.Prefill records, in transactions of c.TxnRecords when
// the run is transactional.
func prefill(ctx context.Context, c *config, seeds []string, firstErr *atomic.Value) error {
	opts := producerOpts(c, seeds, nil)
	if c.TxnRecords > 0 {
		opts = append(opts, kgo.TransactionalID(fmt.Sprintf("%s-%d-prefill", c.Topic, os.Getpid())))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var errs atomic.Int64
	v := make([]byte, c.RecordSize) // shared: never written after this
	t0 := time.Now()
	tx := &txnRun{cl: cl, ctx: ctx, n: c.TxnRecords}
	for i := int64(0); i < c.Prefill && ctx.Err() == nil; i++ {
		if err := tx.begin(); err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
		cl.Produce(ctx, &kgo.Record{Topic: c.Topic, Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				errs.Add(1)
				firstErr.CompareAndSwap(nil, "prefill: "+err.Error())
			}
		})
		if tx.produced(now()) {
			if _, err := tx.end(); err != nil {
				return fmt.Errorf("prefill: %w", err)
			}
		}
	}
	if _, err := tx.end(); err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if !c.Quiet {
		fmt.Fprintf(os.Stderr, "prefill: %d records in %.1fs\n", c.Prefill, time.Since(t0).Seconds())
	}
	if n := errs.Load(); n > 0 {
		return fmt.Errorf("prefill: %d errors", n)
	}
	return nil
}

// warmTxns commits one transaction of one record on every client, all at
// once.
func warmTxns(ctx context.Context, clients []*kgo.Client, c *config) error {
	errs := make(chan error, len(clients))
	for _, cl := range clients {
		go func(cl *kgo.Client) {
			tx := &txnRun{cl: cl, ctx: ctx, n: 1}
			err := tx.begin()
			if err == nil {
				cl.Produce(ctx, &kgo.Record{Topic: c.Topic, Value: make([]byte, c.RecordSize)}, nil)
				tx.produced(now())
				_, err = tx.end()
			}
			errs <- err
		}(cl)
	}
	for range clients {
		if err := <-errs; err != nil {
			return fmt.Errorf("first transaction: %w", err)
		}
	}
	return nil
}

// txnRun is one producer's current transaction; with n == 0 (not
// transactional) every method does nothing.
type txnRun struct {
	cl      *kgo.Client
	ctx     context.Context
	n       int   // records per transaction
	open    bool  // begun and not yet ended
	records int   // produced in the open transaction
	start   int64 // send time (now()) of its first record
}

// begin opens a transaction unless one is open.
func (t *txnRun) begin() error {
	if t.n == 0 || t.open {
		return nil
	}
	if err := t.cl.BeginTransaction(); err != nil {
		return err
	}
	t.open, t.records, t.start = true, 0, 0
	return nil
}

// produced counts a record sent at sent; true when it was the
// transaction's last.
func (t *txnRun) produced(sent int64) bool {
	if t.n == 0 {
		return false
	}
	if t.records == 0 {
		t.start = sent
	}
	t.records++
	return t.records >= t.n
}

// end flushes the open transaction's records and commits it; commit is
// how long EndTransaction took. A commit that fails is aborted (as
// franz-go documents) and the error returned.
func (t *txnRun) end() (commit time.Duration, err error) {
	if t.n == 0 || !t.open {
		return 0, nil
	}
	t.open = false
	// Not the run's context: a commit cut off by it has an unknown outcome.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err = t.cl.Flush(ctx); err == nil {
		t0 := time.Now()
		if err = t.cl.EndTransaction(ctx, kgo.TryCommit); err == nil {
			return time.Since(t0), nil
		}
	}
	if aerr := t.cl.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
		return 0, fmt.Errorf("%w (and the abort: %v)", err, aerr)
	}
	return 0, err
}

func waitBroker(ctx context.Context, adm *kadm.Client, limit time.Duration) error {
	until := time.Now().Add(limit)
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := adm.ListBrokers(rctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(until) || ctx.Err() != nil {
			return fmt.Errorf("broker not reachable: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func createTopic(ctx context.Context, adm *kadm.Client, c *config) error {
	r, err := adm.CreateTopic(ctx, int32(c.Partitions), int16(c.Replication), nil, c.Topic)
	if err == nil {
		err = r.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic: %w", err)
	}
	// Wait until every partition has a leader.
	until := time.Now().Add(2 * time.Minute)
	for {
		md, err := adm.Metadata(ctx, c.Topic)
		if err == nil {
			if t, ok := md.Topics[c.Topic]; ok && t.Err == nil && len(t.Partitions) == c.Partitions {
				ready := true
				for _, p := range t.Partitions {
					if p.Leader < 0 || p.Err != nil {
						ready = false
						break
					}
				}
				if ready {
					return nil
				}
			} else if ok && t.Err == nil && len(t.Partitions) != c.Partitions {
				return fmt.Errorf("topic %s has %d partitions, want %d", c.Topic, len(t.Partitions), c.Partitions)
			}
		}
		if time.Now().After(until) || ctx.Err() != nil {
			return fmt.Errorf("topic %s not ready: %v", c.Topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func round(v float64, digits int) float64 {
	p := 1.0
	for i := 0; i < digits; i++ {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}
