package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/configs"
)

// sessionFetcher sends raw Fetch requests of one version.
type sessionFetcher struct {
	t       *testing.T
	c       *rawConn
	version int16
	topic   string
	topicID [16]byte
	corr    int32
}

type fetchAsk struct {
	partition int32
	offset    int64
}

func (f *sessionFetcher) fetch(id, epoch int32, asks []fetchAsk, forget []int32) *kmsg.FetchResponse {
	f.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = f.version
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MaxBytes = 1 << 20
	req.SessionID, req.SessionEpoch = id, epoch
	if len(asks) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = f.topic, f.topicID
		for _, a := range asks {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = a.partition, a.offset, 1<<20
			rp.CurrentLeaderEpoch = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = f.topic, f.topicID, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	f.corr++
	f.c.send(req, f.corr)
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = f.version
	if corr, err := f.c.recv(resp, f.version >= 12); err != nil || corr != f.corr {
		f.t.Fatalf("fetch: corr %d, %v", corr, err)
	}
	return resp
}

// answered maps each partition in a response to its record bytes.
func answered(resp *kmsg.FetchResponse) map[int32]int {
	out := map[int32]int{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = len(p.RecordBatches)
		}
	}
	return out
}

// TestFetchSessionRules walks one session through Kafka's rules at a
// non-flexible, a flexible, and two topic-id versions.
func TestFetchSessionRules(t *testing.T) {
	b := startBroker(t, nil)
	cl := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(topic string, p int32) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []int16{7, 12, 13, 18} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			topic := fmt.Sprintf("sessions-%d", v)
			ct := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 3, 1
			ct.Topics = append(ct.Topics, rt)
			if resp, err := ct.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
				t.Fatalf("create: %v", err)
			}
			produce(topic, 0)
			produce(topic, 1)
			tp, _ := b.meta.Client().TopicByName(topic)
			f := &sessionFetcher{t: t, c: dialRaw(t, b.addr), version: v, topic: topic, topicID: tp.ID}

			// A full fetch (epoch 0) creates a session and answers all.
			resp := f.fetch(0, 0, []fetchAsk{{0, 0}, {1, 0}, {2, 0}}, nil)
			id := resp.SessionID
			if resp.ErrorCode != 0 || id == 0 {
				t.Fatalf("full fetch: error %d, session %d", resp.ErrorCode, id)
			}
			if got := answered(resp); len(got) != 3 || got[0] == 0 || got[1] == 0 || got[2] != 0 {
				t.Fatalf("full fetch answered %v", got)
			}
			// Incremental, epoch 1: new offsets, nothing new: empty.
			resp = f.fetch(id, 1, []fetchAsk{{0, 1}, {1, 1}}, nil)
			if resp.ErrorCode != 0 || resp.SessionID != id || len(answered(resp)) != 0 {
				t.Fatalf("idle incremental: error %d session %d answered %v", resp.ErrorCode, resp.SessionID, answered(resp))
			}
			// New data on partition 2 only: only it is answered.
			produce(topic, 2)
			resp = f.fetch(id, 2, nil, nil)
			if got := answered(resp); len(got) != 1 || got[2] == 0 {
				t.Fatalf("incremental after produce answered %v", got)
			}
			// The session's scratch arrays are free again for its next fetch.
			if fs := b.srv.fetchSessions.get(id); fs == nil {
				t.Fatal("session gone")
			} else {
				fs.mu.Lock()
				busy := fs.busy
				fs.mu.Unlock()
				if busy {
					t.Fatal("session scratch still held after the response")
				}
			}
			// The same epoch again is a duplicate.
			if resp = f.fetch(id, 2, nil, nil); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
				t.Fatalf("repeated epoch: error %d", resp.ErrorCode)
			}
			// Forget partition 2: its new data is no longer answered,
			// while partition 0's is.
			produce(topic, 2)
			produce(topic, 0)
			resp = f.fetch(id, 3, []fetchAsk{{2, 1}}, []int32{2})
			if got := answered(resp); len(got) != 1 || got[0] == 0 {
				t.Fatalf("after forgetting partition 2 answered %v", got)
			}
			// A version on the other side of v13 cannot use the session.
			other := *f
			other.version = 12
			if v < 13 {
				other.version = 13
			}
			if resp = other.fetch(id, 4, nil, nil); resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
				t.Fatalf("topic id mismatch: error %d", resp.ErrorCode)
			}
			f.corr = other.corr
			if resp = f.fetch(id+1, 1, nil, nil); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
				t.Fatalf("unknown session: error %d", resp.ErrorCode)
			}
			// Epoch -1 closes the session and answers in full, sessionless.
			resp = f.fetch(id, -1, []fetchAsk{{0, 0}}, nil)
			if resp.ErrorCode != 0 || resp.SessionID != 0 || len(answered(resp)) != 1 {
				t.Fatalf("closing fetch: error %d session %d", resp.ErrorCode, resp.SessionID)
			}
			if resp = f.fetch(id, 4, nil, nil); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
				t.Fatalf("closed session: error %d", resp.ErrorCode)
			}
		})
	}
}

// TestFetchSessionCacheEviction covers FetchSessionCacheShard.tryEvict:
// stale sessions go first; otherwise a newcomer evicts the least valuable
// evictable session if it is worth at least as much.
func TestFetchSessionCacheEviction(t *testing.T) {
	const evict = 1000
	parts := func(n int) []*cachedPartition {
		out := make([]*cachedPartition, n)
		for i := range out {
			out[i] = &cachedPartition{key: sessionKey{topic: "t", partition: int32(i)}}
		}
		return out
	}
	type step struct {
		at         int64 // clock, ms
		touch      string
		create     string // name of the new session
		privileged bool
		size       int
		wantOK     bool
		wantGone   string // a session evicted by this step
	}
	tests := []struct {
		name  string
		slots int
		steps []step
	}{
		{"room", 2, []step{
			{at: 0, create: "a", size: 1, wantOK: true},
			{at: 0, create: "b", size: 1, wantOK: true},
		}},
		{"no slots", 0, []step{{at: 0, create: "a", size: 5, privileged: true}}},
		{"young sessions are safe from consumers", 2, []step{
			{at: 0, create: "a", size: 1, wantOK: true},
			{at: 0, create: "b", size: 1, wantOK: true},
			{at: 10, create: "c", size: 100},
		}},
		{"a follower evicts the smallest consumer session", 2, []step{
			{at: 0, create: "a", size: 5, wantOK: true},
			{at: 0, create: "b", size: 3, wantOK: true},
			{at: 10, create: "f", size: 1, privileged: true, wantOK: true, wantGone: "b"},
		}},
		{"a stale session goes first", 2, []step{
			{at: 0, create: "a", size: 50, wantOK: true},
			{at: 0, create: "b", size: 1, wantOK: true},
			{at: 600, touch: "b"},
			{at: evict + 1, create: "c", size: 1, wantOK: true, wantGone: "a"},
		}},
		{"an old session loses to a larger newcomer", 2, []step{
			{at: 0, create: "a", size: 5, wantOK: true},
			{at: 0, create: "b", size: 3, wantOK: true},
			{at: evict, touch: "a"},
			{at: evict, touch: "b"},
			{at: evict + 10, create: "c", size: 2},
			{at: evict + 10, create: "d", size: 4, wantOK: true, wantGone: "b"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFetchSessionCache(tt.slots, evict)
			var now int64
			c.now = func() int64 { return now }
			ids := map[string]int32{}
			for i, st := range tt.steps {
				now = st.at
				if st.touch != "" {
					fs := c.get(ids[st.touch])
					c.touch(fs, len(fs.parts))
					continue
				}
				id := c.create(st.privileged, false, parts(st.size))
				if (id != 0) != st.wantOK {
					t.Fatalf("step %d: create %s got id %d, want ok=%v", i, st.create, id, st.wantOK)
				}
				ids[st.create] = id
				if st.wantGone != "" && c.get(ids[st.wantGone]) != nil {
					t.Fatalf("step %d: %s not evicted", i, st.wantGone)
				}
				if len(c.sessions) > tt.slots {
					t.Fatalf("step %d: %d sessions in %d slots", i, len(c.sessions), tt.slots)
				}
			}
		})
	}
}

func TestNextSessionEpoch(t *testing.T) {
	for in, want := range map[int32]int32{0: 1, 1: 2, -1: -1, 2147483647: 1} {
		if got := nextSessionEpoch(in); got != want {
			t.Errorf("nextSessionEpoch(%d) = %d, want %d", in, got, want)
		}
	}
}

// A franz-go consumer of many partitions fetches through a session and
// still gets every record in order.
func TestFetchSessionFranzGo(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) { c.NumPartitions = 20 })
	cl := b.client(t, kgo.DefaultProduceTopic("many"), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 400
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 37)), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := b.client(t, kgo.ConsumeTopics("many"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	next := map[int32]int64{}
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			got++
		})
	}
	b.srv.fetchSessions.mu.Lock()
	sessions := len(b.srv.fetchSessions.sessions)
	b.srv.fetchSessions.mu.Unlock()
	if sessions == 0 {
		t.Fatal("the consumer fetched without a session")
	}
}

// TestMustRespond is CachedPartition.maybeUpdateResponseData's table:
// which partitions an incremental response carries, and what the session
// then remembers.
func TestMustRespond(t *testing.T) {
	tests := []struct {
		name            string
		hw, logStart    int64 // what the response says
		records         int64
		errCode         int16
		preferred       int32
		want            bool
		wantHW, wantLSO int64 // remembered afterwards
	}{
		{"nothing changed", 10, 0, 0, 0, -1, false, 10, 0},
		{"records", 10, 0, 100, 0, -1, true, 10, 0},
		{"high watermark moved", 11, 0, 0, 0, -1, true, 11, 0},
		{"log start moved", 10, 5, 0, 0, -1, true, 10, 5},
		{"preferred read replica", 10, 0, 0, 0, 2, true, 10, 0},
		{"error: sent, watermark forgotten", 10, 0, 0, 6, -1, true, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := &cachedPartition{highWatermark: 10, logStartOffset: 0}
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.HighWatermark, sp.LogStartOffset, sp.ErrorCode, sp.PreferredReadReplica = tt.hw, tt.logStart, tt.errCode, tt.preferred
			if got := cp.mustRespond(&sp, tt.records, false); got != tt.want {
				t.Fatalf("without update: %v, want %v", got, tt.want)
			}
			if cp.highWatermark != 10 || cp.logStartOffset != 0 {
				t.Fatal("a check without update changed the session")
			}
			if got := cp.mustRespond(&sp, tt.records, true); got != tt.want {
				t.Fatalf("with update: %v, want %v", got, tt.want)
			}
			if cp.highWatermark != tt.wantHW || cp.logStartOffset != tt.wantLSO {
				t.Fatalf("remembers hw %d lso %d, want %d %d", cp.highWatermark, cp.logStartOffset, tt.wantHW, tt.wantLSO)
			}
		})
	}
}
