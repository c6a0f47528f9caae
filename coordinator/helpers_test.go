package coordinator

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// memStore is an in-memory Store.
type memStore struct {
	mu      sync.Mutex
	offsets map[string]map[metastore.TopicPartition]metastore.OffsetCommit
	groups  map[string][]byte
	owners  map[string]int32
	topics  []metastore.Topic
	brokers []metastore.Broker
	saves   int
	shares  map[string]map[metastore.TopicPartition]metastore.ShareState
}

func (s *memStore) SaveShareState(_ context.Context, _ metastore.Fence, group string, topic metastore.TopicID, partition int32, state []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shares == nil {
		s.shares = map[string]map[metastore.TopicPartition]metastore.ShareState{}
	}
	if s.shares[group] == nil {
		s.shares[group] = map[metastore.TopicPartition]metastore.ShareState{}
	}
	s.shares[group][metastore.TopicPartition{Topic: string(topic[:]), Partition: partition}] = metastore.ShareState{Topic: topic, Partition: partition, State: append([]byte{}, state...)}
	return nil
}

func (s *memStore) SaveClaimedShareState(ctx context.Context, f metastore.Fence, group string, topic metastore.TopicID, partition int32, state []byte) error {
	return s.SaveShareState(ctx, f, group, topic, partition, state)
}

// ClaimSharePartition grants every claim: the tests run one coordinator.
func (s *memStore) ClaimSharePartition(_ context.Context, _ string, _ metastore.TopicID, _ int32, f metastore.Fence) (int32, error) {
	return f.Broker, nil
}

func (s *memStore) ReleaseSharePartition(context.Context, string, metastore.TopicID, int32, metastore.Fence) error {
	return nil
}

// SharePartitionHolder reports no claim stored (ShareVerify is not run by
// these tests).
func (s *memStore) SharePartitionHolder(context.Context, string, metastore.TopicID, int32) (metastore.Fence, bool, error) {
	return metastore.Fence{}, false, nil
}

func (s *memStore) LoadShareStates(_ context.Context, group string) ([]metastore.ShareState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []metastore.ShareState
	for _, st := range s.shares[group] {
		out = append(out, st)
	}
	return out, nil
}

func (s *memStore) Brokers() []metastore.Broker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metastore.Broker(nil), s.brokers...)
}

func newMemStore(topics ...metastore.Topic) *memStore {
	return &memStore{offsets: map[string]map[metastore.TopicPartition]metastore.OffsetCommit{},
		groups: map[string][]byte{}, owners: map[string]int32{}, topics: topics}
}

func topic(name string, parts int, id byte) metastore.Topic {
	t := metastore.Topic{Name: name, ID: metastore.TopicID{id}}
	for i := 0; i < parts; i++ {
		t.Partitions = append(t.Partitions, metastore.Partition{ID: int32(i)})
	}
	return t
}

func (s *memStore) CommitOffsets(_ context.Context, _ metastore.Fence, group string, offs []metastore.OffsetCommit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.offsets[group]
	if m == nil {
		m = map[metastore.TopicPartition]metastore.OffsetCommit{}
		s.offsets[group] = m
	}
	for _, o := range offs {
		m[o.TopicPartition] = o
	}
	return nil
}

func (s *memStore) FetchOffsets(_ context.Context, group string, tps []metastore.TopicPartition) ([]metastore.OffsetCommit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []metastore.OffsetCommit
	if tps == nil {
		for _, o := range s.offsets[group] {
			out = append(out, o)
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Topic != out[j].Topic {
				return out[i].Topic < out[j].Topic
			}
			return out[i].Partition < out[j].Partition
		})
		return out, nil
	}
	for _, tp := range tps {
		if o, ok := s.offsets[group][tp]; ok {
			out = append(out, o)
		}
	}
	return out, nil
}

func (s *memStore) DeleteOffsets(_ context.Context, _ metastore.Fence, group string, tps []metastore.TopicPartition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tp := range tps {
		delete(s.offsets[group], tp)
	}
	return nil
}

func (s *memStore) SaveGroup(_ context.Context, _ metastore.Fence, group string, state []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[group] = append([]byte(nil), state...)
	s.saves++
	return nil
}

func (s *memStore) LoadGroup(_ context.Context, group string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.groups[group]
	if !ok {
		return nil, metastore.ErrUnknownGroup
	}
	return b, nil
}

func (s *memStore) DeleteGroup(_ context.Context, _ metastore.Fence, group string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.groups, group)
	delete(s.offsets, group)
	delete(s.owners, group)
	delete(s.shares, group)
	return nil
}

func (s *memStore) ListGroups(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for g := range s.groups {
		seen[g] = true
		out = append(out, g)
	}
	for g, m := range s.offsets {
		if !seen[g] && len(m) > 0 {
			out = append(out, g)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (s *memStore) ClaimGroup(_ context.Context, group string, f metastore.Fence) (int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.owners[group]; ok {
		return o, nil
	}
	s.owners[group] = f.Broker
	return f.Broker, nil
}

func (s *memStore) Topics() []metastore.Topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metastore.Topic(nil), s.topics...)
}

func (s *memStore) TopicByName(name string) (metastore.Topic, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.topics {
		if t.Name == name {
			return t, true
		}
	}
	return metastore.Topic{}, false
}

func (s *memStore) TopicByID(id metastore.TopicID) (metastore.Topic, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.topics {
		if t.ID == id {
			return t, true
		}
	}
	return metastore.Topic{}, false
}

type env struct {
	t     *testing.T
	clock *FakeClock
	store *memStore
	c     *Coordinator
}

func newEnv(t *testing.T, topics ...metastore.Topic) *env {
	t.Helper()
	e := &env{t: t, clock: NewFakeClock(), store: newMemStore(topics...)}
	e.c = e.newCoordinator()
	return e
}

func (e *env) newCoordinator() *Coordinator {
	c, err := New(Config{BrokerID: 1, Store: e.store, Clock: e.clock, ShareCheckMembers: true,
		Logger: zerolog.New(zerolog.NewTestWriter(e.t)).Level(zerolog.WarnLevel)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// joinAsync starts a JoinGroup; the result arrives on the channel.
func (e *env) joinAsync(version int16, group, memberID string, instance *string, protos ...string) <-chan *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = version
	req.Group = group
	req.MemberID = memberID
	req.InstanceID = instance
	req.SessionTimeoutMillis = 10000
	req.RebalanceTimeoutMillis = 20000
	req.ProtocolType = "consumer"
	if len(protos) == 0 {
		protos = []string{"range"}
	}
	for _, p := range protos {
		req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte(p)})
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- e.c.JoinGroup(context.Background(), Client{ID: "cl", Host: "/127.0.0.1"}, req) }()
	return ch
}

func (e *env) join(version int16, group, memberID string, instance *string, protos ...string) *kmsg.JoinGroupResponse {
	e.t.Helper()
	return e.wait(e.joinAsync(version, group, memberID, instance, protos...))
}

func (e *env) wait(ch <-chan *kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
	e.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		e.t.Fatal("JoinGroup did not answer")
	}
	return nil
}

// pending reports that a join is still waiting.
func pending[T any](ch <-chan T) bool {
	time.Sleep(20 * time.Millisecond)
	select {
	case v := <-ch:
		_ = v
		return false
	default:
		return true
	}
}

func (e *env) syncAsync(group, memberID string, gen int32, instance *string, assign map[string]string) <-chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation, req.InstanceID = group, memberID, gen, instance
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	for m, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(a)})
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- e.c.SyncGroup(context.Background(), Client{ID: "cl"}, req) }()
	return ch
}

func (e *env) sync(group, memberID string, gen int32, instance *string, assign map[string]string) *kmsg.SyncGroupResponse {
	e.t.Helper()
	select {
	case r := <-e.syncAsync(group, memberID, gen, instance, assign):
		return r
	case <-time.After(5 * time.Second):
		e.t.Fatal("SyncGroup did not answer")
	}
	return nil
}

func (e *env) heartbeat(group, memberID string, gen int32, instance *string) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation, req.InstanceID = group, memberID, gen, instance
	return e.c.Heartbeat(context.Background(), req).ErrorCode
}
