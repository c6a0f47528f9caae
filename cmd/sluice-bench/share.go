package main

// Share-group drain (-share-consumers N): the topic is prefilled with
// -prefill records, the share group's share.auto.offset.reset is set to
// earliest (a GROUP config, IncrementalAlterConfigs), then N franz-go share
// consumers (kgo.ShareGroup) in one group drain the topic, accepting every
// record (AckAccept). The drain ends when every offset of the topic has
// been delivered and every consumer's acknowledgements have been answered
// (FlushAcks); the throughput is over the time from the first record
// delivered to that end. Distinct offsets are counted, so a redelivery
// (delivery count above 1, or an offset delivered twice) is reported and
// not counted as drained.
//
// The ShareFetch round trip (write, broker, read, as franz-go's BrokerE2E
// hook measures it) is reported for the responses that carried records;
// empty responses are long polls that waited for records held by other
// members and are only counted.
//
// With -broker-pid (a broker on this machine), the broker's CPU time from
// the consumers' start to the first record and from there to the end of
// the drain, and its peak resident set over both (sampled every 100 ms),
// are read from /proc.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareResult is the drain's figures (result.Share).
type shareResult struct {
	Consumers int    `json:"consumers"`
	Group     string `json:"group"`
	// Records are the distinct offsets delivered and accepted; Bytes
	// their values.
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// Deliveries counts every record handed to a consumer, Redelivered
	// those with a delivery count above 1, Duplicates offsets delivered
	// more than once.
	Deliveries  int64 `json:"deliveries"`
	Redelivered int64 `json:"redelivered"`
	Duplicates  int64 `json:"duplicates"`
	// FirstRecordS is from the consumers' creation to the first record
	// delivered (joining, assignment, share-partition initialisation);
	// DrainS from that record to the last acknowledgement answered.
	FirstRecordS float64 `json:"first_record_s"`
	DrainS       float64 `json:"drain_s"`
	RecordsPerS  float64 `json:"records_per_s"`
	MBPerS       float64 `json:"mb_per_s"`
	// PerConsumer is how many records each consumer accepted.
	PerConsumer []int64 `json:"per_consumer"`
	// ShareFetch round trips of responses with records; empty responses
	// and all requests counted.
	Fetch         summary `json:"sharefetch_with_records"`
	FetchEmpty    int64   `json:"sharefetch_empty"`
	FetchRequests int64   `json:"sharefetch_requests"`
	AckErrors     int64   `json:"ack_errors"`
	FirstError    string  `json:"first_error,omitempty"`
	// The broker process (-broker-pid): CPU time from the consumers'
	// creation to the first record (joining, share-partition
	// initialisation) and from there to the end of the drain; peak RSS
	// over both.
	BrokerJoinCPUS   float64 `json:"broker_join_cpu_s"`
	BrokerCPUS       float64 `json:"broker_cpu_s"`
	BrokerPeakRSSMiB float64 `json:"broker_peak_rss_mib"`
}

// shareHook times ShareFetch round trips (API key 78).
type shareHook struct {
	minRecordBytes int
	withRecords    hist
	empty, total   atomic.Int64
	stopped        atomic.Bool
}

func (h *shareHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != 78 || e.Err() != nil || h.stopped.Load() {
		return
	}
	h.total.Add(1)
	// A response smaller than one record's value carried none.
	if e.BytesRead > h.minRecordBytes {
		h.withRecords.record(e.DurationE2E())
	} else {
		h.empty.Add(1)
	}
}

// seenOffsets tracks which offsets of each partition were delivered.
type seenOffsets struct {
	mu       sync.Mutex
	parts    map[int32][]bool
	distinct int64
	dups     int64
}

// add marks an offset delivered; false if it had been before.
func (s *seenOffsets) add(p int32, off int64) bool {
	v := s.parts[p]
	for int64(len(v)) <= off {
		v = append(v, make([]bool, len(v)+1024)...)
	}
	s.parts[p] = v
	if v[off] {
		s.dups++
		return false
	}
	v[off] = true
	s.distinct++
	return true
}

func runShare(ctx context.Context, c *config) (*result, error) {
	seeds, admCl, adm, err := connect(ctx, c)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	res := &result{Config: *c}
	sr := &res.Share
	sr.Consumers = c.ShareConsumers
	sr.Group = fmt.Sprintf("%s-share-%d", c.Topic, os.Getpid())
	if err := setGroupConfig(ctx, admCl, sr.Group, "share.auto.offset.reset", "earliest"); err != nil {
		return res, err
	}
	var firstErr atomic.Value
	if c.Prefill > 0 {
		if err := prefill(ctx, c, seeds, &firstErr); err != nil {
			return res, err
		}
		res.Produce.PrefillRecords = c.Prefill
		res.Produce.TotalRecords = c.Prefill
		res.Produce.TotalBytes = c.Prefill * int64(c.RecordSize)
	}
	// What there is to drain: every partition from offset 0 to its end.
	ends, err := adm.ListEndOffsets(ctx, c.Topic)
	if err != nil {
		return res, fmt.Errorf("list end offsets: %w", err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total == 0 {
		return res, errors.New("nothing to drain: -prefill 0 and an empty topic")
	}

	hook := &shareHook{minRecordBytes: c.RecordSize}
	var ackErrs atomic.Int64
	ackCB := func(_ *kgo.Client, rs kgo.ShareAckResults) {
		for _, r := range rs {
			if r.Err != nil {
				ackErrs.Add(1)
				firstErr.CompareAndSwap(nil, "acknowledge: "+r.Err.Error())
			}
		}
	}
	seen := &seenOffsets{parts: map[int32][]bool{}}
	var (
		deliveries, redelivered, bytes atomic.Int64
		firstAt                        atomic.Int64 // now() of the first record delivered
		fetchErrs                      atomic.Int64
	)
	perConsumer := make([]atomic.Int64, c.ShareConsumers)
	allSeen := make(chan struct{})
	var allOnce sync.Once

	broker := startBrokerWatch(c.BrokerPID)
	t0 := time.Now()
	t0ns := now()
	clients := make([]*kgo.Client, c.ShareConsumers)
	for i := range clients {
		cl, err := kgo.NewClient(append(c.base(seeds),
			kgo.ShareGroup(sr.Group),
			kgo.ConsumeTopics(c.Topic),
			kgo.ShareAckCallback(ackCB),
			kgo.WithHooks(hook),
		)...)
		if err != nil {
			return res, err
		}
		defer cl.Close()
		clients[i] = cl
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollRecords(cctx, 0)
				if cctx.Err() != nil {
					return
				}
				fs.EachError(func(_ string, _ int32, err error) {
					if !errors.Is(err, context.Canceled) {
						fetchErrs.Add(1)
						firstErr.CompareAndSwap(nil, "share fetch: "+err.Error())
					}
				})
				rs := fs.Records()
				if len(rs) == 0 {
					continue
				}
				if firstAt.CompareAndSwap(0, now()) {
					broker.mark()
				}
				var n, b, re int64
				seen.mu.Lock()
				for _, r := range rs {
					if seen.add(r.Partition, r.Offset) {
						n++
						b += int64(len(r.Value))
					}
					if r.DeliveryCount() > 1 {
						re++
					}
				}
				done := seen.distinct >= total
				seen.mu.Unlock()
				for _, r := range rs {
					r.Ack(kgo.AckAccept)
				}
				deliveries.Add(int64(len(rs)))
				redelivered.Add(re)
				bytes.Add(b)
				perConsumer[i].Add(n)
				if done {
					allOnce.Do(func() { close(allSeen) })
				}
			}
		}()
	}
	// Progress once a second until every offset was delivered.
	limit := time.NewTimer(c.MaxDuration)
	defer limit.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var prev int64
	drained := false
	for !drained {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-limit.C:
			cancel()
			wg.Wait()
			seen.mu.Lock()
			d := seen.distinct
			seen.mu.Unlock()
			return res, fmt.Errorf("drained %d of %d records within -max-duration %s", d, total, c.MaxDuration)
		case <-allSeen:
			drained = true
		case t := <-tick.C:
			seen.mu.Lock()
			d := seen.distinct
			seen.mu.Unlock()
			if !c.Quiet {
				fmt.Fprintf(os.Stderr, "%5.1fs share drain %8d rec/s, %d of %d, ShareFetch p99 %7.2f ms, empty %d\n",
					t.Sub(t0).Seconds(), d-prev, d, total, ms(hook.withRecords.quantile(0.99)), hook.empty.Load())
			}
			prev = d
		}
	}
	// Every record delivered: stop polling, then have every consumer's
	// acknowledgements sent and answered.
	cancel()
	wg.Wait()
	fctx, fcancel := context.WithTimeout(ctx, time.Minute)
	var fwg sync.WaitGroup
	for _, cl := range clients {
		fwg.Add(1)
		go func() {
			defer fwg.Done()
			if err := cl.FlushAcks(fctx); err != nil {
				ackErrs.Add(1)
				firstErr.CompareAndSwap(nil, "flush acks: "+err.Error())
			}
		}()
	}
	fwg.Wait()
	fcancel()
	endNs := now()
	hook.stopped.Store(true)
	sr.BrokerJoinCPUS, sr.BrokerCPUS, sr.BrokerPeakRSSMiB = broker.stop()

	sr.Records = seen.distinct
	sr.Bytes = bytes.Load()
	sr.Deliveries = deliveries.Load()
	sr.Redelivered = redelivered.Load()
	sr.Duplicates = seen.dups
	sr.FirstRecordS = round(time.Duration(firstAt.Load()-t0ns).Seconds(), 3)
	drain := time.Duration(endNs - firstAt.Load()).Seconds()
	sr.DrainS = round(drain, 3)
	sr.RecordsPerS = round(float64(sr.Records)/drain, 1)
	sr.MBPerS = round(float64(sr.Bytes)/drain/1e6, 2)
	for i := range perConsumer {
		sr.PerConsumer = append(sr.PerConsumer, perConsumer[i].Load())
	}
	sr.Fetch = hook.withRecords.summary()
	sr.FetchEmpty = hook.empty.Load()
	sr.FetchRequests = hook.total.Load()
	sr.AckErrors = ackErrs.Load()
	res.WindowS = sr.DrainS
	res.ElapsedS = round(time.Since(t0).Seconds(), 3)
	if e, ok := firstErr.Load().(string); ok {
		sr.FirstError = e
	}
	if !c.Quiet {
		fmt.Fprintf(os.Stderr, "share drain: %d records in %.2fs after %.2fs to the first (%.0f rec/s, %.1f MB/s), per consumer %v, redelivered %d\n",
			sr.Records, drain, sr.FirstRecordS, sr.RecordsPerS, sr.MBPerS, sr.PerConsumer, sr.Redelivered)
	}
	// Closing the clients leaves the group (deferred), unmeasured.
	if sr.AckErrors > 0 || fetchErrs.Load() > 0 {
		return res, fmt.Errorf("%d acknowledgement, %d share fetch errors; first: %s", sr.AckErrors, fetchErrs.Load(), sr.FirstError)
	}
	return res, nil
}

// setGroupConfig sets a dynamic group config (IncrementalAlterConfigs,
// resource type GROUP), as kafka-configs --entity-type groups does.
func setGroupConfig(ctx context.Context, cl *kgo.Client, group, name, value string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = name, kmsg.StringPtr(value)
	r.Configs = append(r.Configs, cfg)
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("group config %s: %w", name, err)
	}
	for _, rr := range resp.Resources {
		if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
			return fmt.Errorf("group config %s=%s: %w", name, value, err)
		}
	}
	return nil
}

// brokerWatch reads a local broker's CPU time and samples its resident
// set until stopped; pid 0 watches nothing.
type brokerWatch struct {
	pid     int
	cpu0    float64
	cpuMark atomic.Value // float64: CPU seconds at mark()
	peakKiB atomic.Int64
	done    chan struct{}
	wg      sync.WaitGroup
}

func startBrokerWatch(pid int) *brokerWatch {
	w := &brokerWatch{pid: pid, done: make(chan struct{})}
	if pid == 0 {
		return w
	}
	w.cpu0 = procCPU(pid)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if kb := procRSSKiB(pid); kb > w.peakKiB.Load() {
				w.peakKiB.Store(kb)
			}
			select {
			case <-w.done:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// mark notes the CPU time at the first record.
func (w *brokerWatch) mark() {
	if w.pid != 0 {
		w.cpuMark.Store(procCPU(w.pid))
	}
}

// stop returns the CPU seconds from the start to the mark and from the
// mark to now, and the peak RSS in MiB.
func (w *brokerWatch) stop() (join, drain, rssMiB float64) {
	if w.pid == 0 {
		return 0, 0, 0
	}
	close(w.done)
	w.wg.Wait()
	if kb := procRSSKiB(w.pid); kb > w.peakKiB.Load() {
		w.peakKiB.Store(kb)
	}
	m, ok := w.cpuMark.Load().(float64)
	if !ok {
		m = w.cpu0
	}
	return round(m-w.cpu0, 3), round(procCPU(w.pid)-m, 3), round(float64(w.peakKiB.Load())/1024, 1)
}

// procCPU is a process's user and system time in seconds (clock ticks of
// 1/100 s, as on Linux).
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

func procRSSKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			if f := strings.Fields(l); len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb
			}
		}
	}
	return 0
}
