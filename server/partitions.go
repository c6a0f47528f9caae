package server

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
)

// hostedPartition is what the handlers need from a partition this broker
// hosts (partition.Partition, a reader and a writer): a raft replica —
// leader, follower or learner — from the raft host (partition.Host), or
// one of the __consumer_offsets view's local logs. The handlers never
// learn which one they talk to, nor how it stores its data: server
// imports package partition only, never replica or log.
type hostedPartition = partition.Partition

// errNotHosted: the partition is assigned to other brokers.
var errNotHosted = errors.New("this broker is not a replica of the partition")

// errNoSharedStorage: a partition of a topic in replication.mode=shared on
// a broker without shared storage configured.
var errNoSharedStorage = errors.New("this broker has no shared storage for a shared-mode partition")

// isShared says whether t's partitions live in shared storage
// (replication.mode=shared in the topic's own configs: the mode is pinned
// when the topic is created, never inherited later).
func isShared(t metastore.Topic) bool {
	return strings.EqualFold(t.Configs["replication.mode"], "shared")
}

// members converts a partition's assignment for the raft host.
func members(p metastore.Partition) partition.Members {
	var m partition.Members
	for _, v := range p.Voters {
		m.Voters = append(m.Voters, partition.NodeID(v))
	}
	for _, l := range p.Learners {
		m.Learners = append(m.Learners, partition.NodeID(l))
	}
	return m
}

// assigned says whether this broker should run a replica of p: a voter, a
// learner, or a voter a reassignment in progress adds.
func (s *Server) assigned(p metastore.Partition) bool {
	id := s.cfg.NodeID
	return slices.Contains(p.Voters, id) || slices.Contains(p.Learners, id) || slices.Contains(p.Target, id)
}

// openReplica opens this broker's replica of partition idx of t. A raft
// replica without state on disk starts from the configuration the group
// was created with: a broker that was in it and never left the partition
// is one of the group's founders (metastore.Partition.Founder; it may
// campaign at once, as at creation); any other broker, a founder moved
// away and back included, joins a running group (a reassignment or a read
// broker that registered later) and replays the configuration changes in
// the log from there (replica.Host.OpenJoining).
func (s *Server) openReplica(t metastore.Topic, k partition.Key) (partition.Replica, error) {
	if _, ok := s.handingOver.Load(k); ok {
		// Closed for an async handover (HandOffAsyncMasters): opened
		// again it would campaign as the sole voter it was.
		return nil, errNotHosted
	}
	iv, il := t.Partitions[k.Index].Initial()
	initial := members(metastore.Partition{Voters: iv, Learners: il})
	founder := t.Partitions[k.Index].Founder(s.cfg.NodeID)
	if p := t.Partitions[k.Index]; p.AsyncMaster != nil && p.AsyncTakeover != nil && *p.AsyncMaster != s.cfg.NodeID {
		// Another broker was promoted async master: follow it before
		// raft runs here (async_master.go). A returning old master cuts
		// what its successor never received, and never campaigns as the
		// sole voter it was; a joining broker starts from the new
		// master's configuration (the log's changes before the takeover
		// name the old master).
		// The joiner's members are the assignment's: the new master's
		// configuration holds every member added before the takeover.
		follow, from := s.raft.FollowJoining, members(p)
		if founder {
			follow, from = s.raft.Follow, initial
		}
		r, cut, err := follow(t.Name, k, from, s.replicaOptions(t), partition.NodeID(*p.AsyncMaster), takeoverOf(*p.AsyncTakeover))
		if err == nil && cut > 0 {
			s.log.Warn().Str("topic", t.Name).Int32("partition", k.Index).Int32("master", *p.AsyncMaster).Int64("records_cut", cut).
				Msg("async failover: following the new master; records it never received were cut")
		}
		return r, err
	}
	if founder {
		return s.raft.Open(t.Name, k, initial, s.replicaOptions(t))
	}
	return s.raft.OpenJoining(t.Name, k, initial, s.replicaOptions(t))
}

func (s *Server) replicaOptions(t metastore.Topic) partition.Options {
	mode, _ := s.topicConfig(t, "replication.mode")
	m, err := partition.ParseMode(mode.value)
	if err != nil || m == partition.ModeShared {
		// Validated before it is stored. A raft replica never runs in
		// shared mode: a topic whose own config is shared is served by
		// the shared partitions, and a raft topic created before the
		// cluster default became shared stays raft.
		m = partition.ModeRaft
	}
	return partition.Options{
		Mode:                 m,
		MinInsyncReplicas:    int(s.topicInt(t, "min.insync.replicas")),
		SemiSyncWaitReplicas: int(s.topicInt(t, "semi.sync.wait.replicas")),
		SemiSyncTimeout:      time.Duration(s.topicInt(t, "semi.sync.timeout.ms")) * time.Millisecond,
		Log:                  s.logConfig(t),
	}
}

// partition returns the hosted partition idx of t, opening it on first use.
func (s *Server) partition(t metastore.Topic, idx int32) (hostedPartition, error) {
	if p, ok := s.offsetsPartition(t, idx); ok {
		return p, nil
	}
	k := partition.Key{TopicID: t.ID, Index: idx}
	if isShared(t) {
		// Any broker serves a shared partition: its data is in shared
		// storage, and the metastore says who writes it.
		if int(idx) >= len(t.Partitions) {
			return nil, errNotHosted
		}
		if s.shared == nil {
			return nil, errNoSharedStorage
		}
		return s.shared.Open(t.Name, k)
	}
	if r, ok := s.raft.Get(k); ok {
		if err := r.Failed(); err != nil {
			// Offline here, as Kafka answers for a replica on a failed
			// log directory: KAFKA_STORAGE_ERROR.
			return nil, err
		}
		return r, nil
	}
	if int(idx) >= len(t.Partitions) || !s.assigned(t.Partitions[idx]) {
		return nil, errNotHosted
	}
	return s.openReplica(t, k)
}

// refreshPartitionsWithin runs refreshPartitions and waits for it at most
// half of timeoutMs, the timeout of the CreateTopics or CreatePartitions
// request that changed the partitions (5 s if it gave none): the new
// partitions usually open within it, so the first produce finds them;
// those of a very large topic go on opening after the answer, as Kafka
// answers once the controller has the topic, not once every log exists.
// Until a partition is open here, requests for it get retriable errors.
//
// Within the same bound it then waits until every partition of topics
// has had its first election published (a leader epoch above 0). Until
// then the metastore names the first voter with epoch 0, a placeholder
// the election replaces: a client that took its metadata in between
// (a consumer started right after creating its topic) would send epoch
// 0, be answered FENCED_LEADER_EPOCH by replicas already in the elected
// term, and wait for newer metadata (franz-go: 5 s by default). Kafka's
// controller elects a new partition's leader as part of creating it, so
// the epoch a client sees after CreateTopics stays valid.
func (s *Server) refreshPartitionsWithin(timeoutMs int32, topics []string) {
	d := time.Duration(timeoutMs) * time.Millisecond / 2
	if timeoutMs <= 0 {
		d = 5 * time.Second
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer s.containPanic("refreshPartitions", "following the catalog after a topic change panicked; the partitions it left are opened on first use", nil)
		s.refreshPartitions()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		return
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !s.electedOnce(topics) {
		select {
		case <-tick.C:
		case <-t.C:
			return
		}
	}
}

// electedOnce reports whether every partition of topics (those that
// exist) has a leader epoch above 0 in the catalog: its first raft
// election is published.
func (s *Server) electedOnce(topics []string) bool {
	for _, name := range topics {
		t, ok := s.catalog.TopicByName(name)
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			if p.LeaderEpoch <= 0 {
				return false
			}
		}
	}
	return true
}

// openParallel is how many replicas refreshPartitions opens at once.
const openParallel = 16

// refreshPartitions makes the hosted partitions follow the catalog: removes
// the partitions of deleted topics and those moved away, opens the ones
// assigned here (in a cluster a follower must run its replica before any
// client asks for it), and reapplies topic configs. Called after changes
// this broker made and whenever the catalog changes. It reports false when
// a partition assigned here could not open yet because a deleted topic of
// the same name held its directory (FollowCatalog retries).
func (s *Server) refreshPartitions() (complete bool) {
	topics := s.catalog.Topics()
	live := make(map[partition.Key]metastore.Topic)
	// gone: partitions reassigned away from this broker, whose
	// reassignment is complete (never while one is in progress: the raft
	// group may still count on this replica).
	gone := make(map[partition.Key]bool)
	names := make(map[string]bool)
	for _, t := range topics {
		names[t.Name] = true
		for i, p := range t.Partitions {
			k := partition.Key{TopicID: t.ID, Index: int32(i)}
			live[k] = t
			if !s.assigned(p) && p.Target == nil {
				gone[k] = true
			}
		}
	}
	// Removals first: a topic deleted and created again under its name
	// has new partitions in the old ones' directories, which open only
	// once the old replicas are gone (replica.ErrDirInUse).
	if s.shared != nil {
		for _, k := range s.shared.Keys() {
			if _, ok := live[k]; !ok {
				_ = s.shared.Remove(k) // its topic was deleted
			}
		}
	}
	for _, r := range s.raft.Replicas() {
		k := r.Key()
		if _, ok := live[k]; ok && !gone[k] {
			continue
		}
		if err := s.raft.Remove(k, true); err != nil {
			s.log.Error().Err(err).Str("topic", r.Topic()).Int32("partition", k.Index).Msg("removing replica")
		} else if gone[k] {
			s.log.Info().Str("topic", r.Topic()).Int32("partition", k.Index).Msg("partition moved away from this broker: replica deleted")
		}
	}
	// Replicas not open yet are opened openParallel at a time: opening a
	// new group waits on fsyncs and, for a sole voter, on its own
	// election, which overlap across partitions (one at a time, a topic
	// of 2100 partitions took minutes to create on a loaded single node).
	var opening sync.WaitGroup
	var failed atomic.Bool
	slots := make(chan struct{}, openParallel)
	open := func(t metastore.Topic, i int) {
		if _, err := s.partition(t, int32(i)); err != nil {
			if errors.Is(err, partition.ErrDirInUse) {
				failed.Store(true)
			}
			s.log.Error().Err(err).Str("topic", t.Name).Int("partition", i).Msg("opening replica")
		}
	}
	for _, t := range topics {
		for i, p := range t.Partitions {
			k := partition.Key{TopicID: t.ID, Index: int32(i)}
			if !s.assigned(p) {
				continue
			}
			if isShared(t) {
				// No raft group: opening it makes its named leader
				// claim it (package shared).
				open(t, i)
				continue
			}
			if _, ok := s.raft.Get(k); ok {
				open(t, i) // open already: reports a failed replica
				continue
			}
			slots <- struct{}{}
			opening.Add(1)
			go func() {
				defer opening.Done()
				defer func() { <-slots }()
				defer s.containPanic("refreshPartitions", "opening a replica panicked; it is opened again on first use", nil)
				open(t, i)
			}()
		}
	}
	opening.Wait()
	s.topicSeries.follow(s.metrics, names)
	for _, r := range s.raft.Replicas() {
		if t, ok := live[r.Key()]; ok {
			if err := r.SetOptions(s.replicaOptions(t)); err != nil {
				s.log.Error().Err(err).Str("topic", t.Name).Int32("partition", r.Key().Index).Msg("refusing topic config")
			}
		}
	}
	return !failed.Load()
}

// readablePartition finds partition idx of a topic for a read-side request
// (ListOffsets, OffsetForLeaderEpoch, Fetch) and fences a client leader
// epoch (KIP-320; epoch < 0 means the client sent none). It returns the
// partition, or the Kafka error code to answer.
func (s *Server) readablePartition(t metastore.Topic, known bool, idx, clientEpoch int32) (hostedPartition, int16) {
	if !known || idx < 0 || int(idx) >= len(t.Partitions) {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	p, err := s.partition(t, idx)
	if err != nil {
		return nil, errorCode(err)
	}
	if clientEpoch >= 0 {
		if code := checkLeaderEpoch(clientEpoch, p.LeaderEpoch()); code != 0 {
			return nil, code
		}
	}
	return p, 0
}

// offlineHere reports whether this broker's replica of partition idx of t
// stopped after a failure (replica.Replica.Failed).
func (s *Server) offlineHere(t metastore.Topic, idx int32) bool {
	r, ok := s.raft.Get(partition.Key{TopicID: t.ID, Index: idx})
	return ok && r.Failed() != nil
}
