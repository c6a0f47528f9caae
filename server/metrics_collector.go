package server

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-broker/sluice/partition"
)

// groupLagTimeout bounds the metastore reads one scrape makes for the lag
// of the groups coordinated here.
const groupLagTimeout = 2 * time.Second

// desc is shorthand for the collector's descriptions.
func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	pl = []string{"topic", "partition"}

	descLEO      = desc("sluice_partition_log_end_offset", "Offset after the last entry of the local log.", pl...)
	descLSO      = desc("sluice_partition_log_start_offset", "First offset of the local log.", pl...)
	descHW       = desc("sluice_partition_high_watermark", "Committed offset as this replica knows it.", pl...)
	descSize     = desc("sluice_partition_log_size_bytes", "Bytes of record batches in the local log's segments (Kafka's Log Size).", pl...)
	descSegs     = desc("sluice_partition_log_segments", "Segments of the local log (Kafka's NumLogSegments).", pl...)
	descLeader   = desc("sluice_partition_leader", "1 if this broker leads the partition.", pl...)
	descTerm     = desc("sluice_partition_raft_term", "Raft term this replica knows: each increase is an election.", pl...)
	descReplicas = desc("sluice_partition_replicas", "Voters of the partition's raft group, as this replica knows them.", pl...)
	descISR      = desc("sluice_partition_in_sync_replicas", "Voters in sync (min.insync.replicas' count, the leader included); reported by the leader only.", pl...)
	descUnderRep = desc("sluice_partition_under_replicated", "1 if fewer voters are in sync than there are voters; reported by the leader only, as Kafka does.", pl...)
	descUnderMin = desc("sluice_partition_under_min_isr", "1 if fewer voters are in sync than min.insync.replicas; reported by the leader only.", pl...)
	descLastIdx  = desc("sluice_partition_raft_last_index", "Last raft index of this replica: its rate on the leader is the partition's proposals (batches and raft entries) per second.", pl...)
	descApplyLag = desc("sluice_partition_raft_apply_lag_entries", "Committed raft entries this replica has not applied yet.", pl...)
	descLag      = desc("sluice_partition_follower_lag_entries", "Raft entries (batches) a member is behind the leader's last entry; reported by the leader, by member node id.", "topic", "partition", "replica")
	descLagOffs  = desc("sluice_partition_follower_lag_offsets", "Offsets (records) a member is behind the leader's log end offset; reported by the leader, by member node id.", "topic", "partition", "replica")
	descSemiFB   = desc("sluice_partition_semi_sync_fallback", "1 while a semi-sync partition led here has fallen back to async answers (its voters did not acknowledge within semi.sync.timeout.ms and have not caught up since); reported by the leader only.", pl...)
	descLagSecs  = desc("sluice_partition_follower_lag_seconds", "Time since a member last had the leader's whole log (0 while it has it; replica.lag.time.max.ms bounds it for the ISR); reported by the leader, by member node id.", "topic", "partition", "replica")

	descHosted        = desc("sluice_partitions", "Partitions this broker hosts a replica of.")
	descLeaders       = desc("sluice_leader_partitions", "Partitions this broker leads (Kafka's LeaderCount).")
	descURP           = desc("sluice_under_replicated_partitions", "Partitions led here with a voter out of sync (Kafka's UnderReplicatedPartitions).")
	descUnderMinCount = desc("sluice_under_min_isr_partitions", "Partitions led here with fewer voters in sync than min.insync.replicas (Kafka's UnderMinIsrPartitionCount).")
	descLeaderless    = desc("sluice_leaderless_partitions", "Partitions hosted here whose replica knows no leader (an election is under way or a quorum is lost).")
	descOffline       = desc("sluice_offline_partitions", "Partitions assigned to this broker in the catalog that it does not host (opening the replica failed).")

	gl = []string{"group"}

	descGroupMembers = desc("sluice_group_members", "Members of a consumer group coordinated here.", gl...)
	descGroupState   = desc("sluice_group_state", "1 for the state a group coordinated here is in.", "group", "state")
	descGroupLag     = desc("sluice_group_lag", "The partition's high watermark as consumers see it minus the group's committed offset, for the partitions this broker hosts.", "group", "topic", "partition")
	descGroupOffset  = desc("sluice_group_committed_offset", "The group's committed offset.", "group", "topic", "partition")
	descGroups       = desc("sluice_groups", "Consumer groups coordinated here.")
	descRebalances   = desc("sluice_group_rebalances_total", "Rebalances completed by groups coordinated here since start (generation or group epoch bumps).")

	descCleanerPasses   = desc("sluice_log_cleaner_passes_total", "Log cleaning passes completed (one log each).")
	descCleanerSegments = desc("sluice_log_cleaner_segments_total", "Segments rewritten by the log cleaner.")
	descCleanerRead     = desc("sluice_log_cleaner_read_bytes_total", "Segment bytes the log cleaner read (offset map and rewrite).")
	descCleanerWritten  = desc("sluice_log_cleaner_written_bytes_total", "Bytes of cleaned segments the log cleaner wrote.")
	descCleanerRemoved  = desc("sluice_log_cleaner_removed_records_total", "Records the log cleaner removed (superseded keys, expired tombstones, keyless records).")
	descCleanerErrors   = desc("sluice_log_cleaner_errors_total", "Cleaning passes that failed.")
	descCleanerDirty    = desc("sluice_log_cleaner_max_dirty_percent", "Highest dirty ratio, in percent, among the cleanable logs at the last selection (Kafka's max-dirty-percent).")
	descCleanerLastPass = desc("sluice_log_cleaner_last_pass_seconds", "Duration of the last completed cleaning pass.")

	descTxnDone     = desc("sluice_transactions_completed_total", "Transactions the transaction coordinator here completed since start (markers written to every partition), by result (commit, abort).", "result")
	descTxnTimedOut = desc("sluice_transactions_timed_out_total", "Transactions the coordinator here aborted since start because they stayed open past their timeout.")
)

// collector computes the partition and group series at scrape time from
// the hosted partitions and the coordinator, so a deleted topic's or
// partition's series disappear with its replica.
type collector struct{ s *Server }

// Describe sends nothing: the series come and go with the partitions, so
// the collector is unchecked.
func (collector) Describe(chan<- *prometheus.Desc) {}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	var hosted, leaders, urp, underMin, leaderless, offline int
	// hw: the hosted partitions' high watermarks, for the group lag.
	hw := make(map[partition.Key]int64)
	common := func(topic, part string, p hostedPartition) {
		hosted++
		gauge(ch, descLEO, float64(p.LogEndOffset()), topic, part)
		gauge(ch, descLSO, float64(p.LogStartOffset()), topic, part)
		gauge(ch, descHW, float64(p.HighWatermark()), topic, part)
		size, segs := p.Storage().Size()
		gauge(ch, descSize, float64(size), topic, part)
		gauge(ch, descSegs, float64(segs), topic, part)
		lead := p.IsLeader()
		gauge(ch, descLeader, b2f(lead), topic, part)
		if lead {
			leaders++
		}
	}
	present := make(map[partition.Key]bool)
	for _, r := range s.raft.Replicas() {
		k := r.Key()
		present[k] = true
		hw[k] = r.HighWatermark()
		topic, part := r.Topic(), strconv.Itoa(int(k.Index))
		common(topic, part, r)
		gauge(ch, descTerm, float64(r.Term()), topic, part)
		last, commit, applied := r.RaftIndexes()
		gauge(ch, descLastIdx, float64(last), topic, part)
		gauge(ch, descApplyLag, float64(commit-min(applied, commit)), topic, part)
		voters := len(r.Members().Voters)
		gauge(ch, descReplicas, float64(voters), topic, part)
		if r.Leader() < 0 || r.Term() == 0 {
			leaderless++
		}
		if !r.IsLeader() {
			continue
		}
		isr := r.InSyncVoters()
		minISR := 1
		if t, ok := s.catalog.TopicByID(k.TopicID); ok {
			minISR = int(s.topicInt(t, "min.insync.replicas"))
		}
		gauge(ch, descISR, float64(isr), topic, part)
		gauge(ch, descSemiFB, b2f(r.SemiSyncFallback()), topic, part)
		gauge(ch, descUnderRep, b2f(isr < voters), topic, part)
		gauge(ch, descUnderMin, b2f(isr < minISR), topic, part)
		if isr < voters {
			urp++
		}
		if isr < minISR {
			underMin++
		}
		for id, lag := range r.MemberLags() {
			member := strconv.Itoa(int(id))
			gauge(ch, descLag, float64(lag.Entries), topic, part, member)
			gauge(ch, descLagOffs, float64(lag.Offsets), topic, part, member)
			gauge(ch, descLagSecs, lag.Time.Seconds(), topic, part, member)
		}
	}
	for _, t := range s.catalog.Topics() {
		for i, p := range t.Partitions {
			k := partition.Key{TopicID: t.ID, Index: int32(i)}
			if s.assigned(p) && !present[k] {
				offline++
			}
		}
	}
	gauge(ch, descHosted, float64(hosted))
	gauge(ch, descLeaders, float64(leaders))
	gauge(ch, descURP, float64(urp))
	gauge(ch, descUnderMinCount, float64(underMin))
	gauge(ch, descLeaderless, float64(leaderless))
	gauge(ch, descOffline, float64(offline))
	if cl := s.cleaner.Load(); cl != nil {
		t := (*cl).Totals()
		for d, v := range map[*prometheus.Desc]int64{
			descCleanerPasses: t.Passes, descCleanerSegments: t.Segments, descCleanerRead: t.BytesRead,
			descCleanerWritten: t.BytesWritten, descCleanerRemoved: t.RecordsGone, descCleanerErrors: t.Errors,
		} {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
		}
		gauge(ch, descCleanerDirty, float64(t.MaxDirtyRatioPercent))
		gauge(ch, descCleanerLastPass, float64(t.LastPassMillis)/1000)
	}
	if s.groups != nil {
		c.collectGroups(ch, hw)
	}
	if s.txn != nil {
		committed, aborted, timedOut := s.txn.Stats()
		ch <- prometheus.MustNewConstMetric(descTxnDone, prometheus.CounterValue, float64(committed), "commit")
		ch <- prometheus.MustNewConstMetric(descTxnDone, prometheus.CounterValue, float64(aborted), "abort")
		ch <- prometheus.MustNewConstMetric(descTxnTimedOut, prometheus.CounterValue, float64(timedOut))
	}
}

// collectGroups reports the groups coordinated here, with their committed
// offsets and lag (one metastore read per group, bounded by
// groupLagTimeout in all). A partition this broker does not host has no
// high watermark here, so its lag is left out rather than guessed.
func (c collector) collectGroups(ch chan<- prometheus.Metric, hw map[partition.Key]int64) {
	s := c.s
	stats := s.groups.Stats()
	gauge(ch, descGroups, float64(len(stats)))
	ch <- prometheus.MustNewConstMetric(descRebalances, prometheus.CounterValue, float64(s.groups.Rebalances()))
	ctx, cancel := context.WithTimeout(context.Background(), groupLagTimeout)
	defer cancel()
	for _, g := range stats {
		gauge(ch, descGroupMembers, float64(g.Members), g.Name)
		gauge(ch, descGroupState, 1, g.Name, g.State)
		offs, err := s.groupOffsets(ctx, g.Name, hw)
		if err != nil {
			continue // the metastore is slow or unreachable: no lag this scrape
		}
		for _, o := range offs {
			part := strconv.Itoa(int(o.Partition))
			gauge(ch, descGroupOffset, float64(o.Committed), g.Name, o.Topic, part)
			if o.HasLag {
				gauge(ch, descGroupLag, float64(o.Lag), g.Name, o.Topic, part)
			}
		}
	}
}

// topicSeries remembers the topic names the per-topic counters may carry,
// so that refreshPartitions can delete those of deleted topics.
type topicSeries struct {
	mu    sync.Mutex
	names map[string]bool
}

// follow deletes the per-topic counters of topics that were in the catalog
// at the last call and are not in names.
func (ts *topicSeries) follow(m *Metrics, names map[string]bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	m.forgetTopics(ts.names, names)
	ts.names = names
}
