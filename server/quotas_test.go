package server

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/configs"
)

// quotaBroker is a broker whose quotas are measured over two windows of
// one second, so that throttle times are short and computable.
func quotaBroker(t *testing.T) (*testBroker, *kgo.Client) {
	b := startBroker(t, func(c *configs.Config) {
		c.QuotaWindowNum, c.ControllerQuotaWindowNum = 2, 2
	})
	return b, b.client(t, kgo.ClientID("admin"))
}

type quotaEnt struct{ typ, name string } // name "" is <default>

func alterQuota(t *testing.T, cl *kgo.Client, ents []quotaEnt, key string, value float64) {
	t.Helper()
	req := kmsg.NewPtrAlterClientQuotasRequest()
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for _, qe := range ents {
		ee := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ee.Type = qe.typ
		if qe.name != "" {
			ee.Name = kmsg.StringPtr(qe.name)
		}
		e.Entity = append(e.Entity, ee)
	}
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value, op.Remove = key, value, value == 0
	e.Ops = append(e.Ops, op)
	req.Entries = append(req.Entries, e)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Entries[0].ErrorCode; c != 0 {
		t.Fatalf("alter %v %s=%v: %v %v", ents, key, value, kerr.ErrorForCode(c), resp.Entries[0].ErrorMessage)
	}
}

func createTopic(t *testing.T, cl *kgo.Client, name string, parts int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", name, err, resp)
	}
}

func rawProduce(c *rawConn, topic string, batch []byte, corr int32) *kmsg.ProduceResponse {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c.send(req, corr)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	if got, err := c.recv(resp, true); err != nil || got != corr {
		c.t.Fatalf("produce %d: corr %d err %v", corr, got, err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		c.t.Fatalf("produce %d: %v", corr, kerr.ErrorForCode(code))
	}
	return resp
}

func TestQuotaProduceThrottlesAndMutes(t *testing.T) {
	b, admin := quotaBroker(t)
	createTopic(t, admin, "q", 1)
	alterQuota(t, admin, []quotaEnt{{"client-id", "raw"}}, "producer_byte_rate", 100_000)
	c := dialRaw(t, b.addr)
	batch := makeTestBatch(60, 1000) // about 60 KB
	if r := rawProduce(c, "q", batch, 1); r.ThrottleMillis != 0 {
		t.Fatalf("first 60 KB in a fresh window of 1 s at 100 KB/s: throttled %d ms", r.ThrottleMillis)
	}
	// 120 KB over a window of about 1 s is 20% over 100 KB/s: about
	// 200 ms (Kafka's (rate-bound)/bound*window).
	r := rawProduce(c, "q", batch, 2)
	if r.ThrottleMillis < 150 || r.ThrottleMillis > 400 {
		t.Fatalf("second 60 KB: throttle %d ms, want about 200", r.ThrottleMillis)
	}
	// The connection is muted for the throttle time: the next request is
	// not read before it ends (KIP-219).
	start := time.Now()
	rawProduce(c, "q", makeTestBatch(1, 10), 3)
	if waited := time.Since(start); waited < time.Duration(r.ThrottleMillis-30)*time.Millisecond {
		t.Fatalf("next request answered %v after a %d ms throttle", waited, r.ThrottleMillis)
	}
	// Another client id is not under the quota.
	other := b.client(t, kgo.ClientID("free"))
	for i := range 3 {
		if err := other.ProduceSync(context.Background(), &kgo.Record{Topic: "q", Value: make([]byte, 50_000)}).FirstErr(); err != nil {
			t.Fatal(i, err)
		}
	}
}

func TestQuotaFetchCapsAndThrottles(t *testing.T) {
	b, admin := quotaBroker(t)
	createTopic(t, admin, "f", 1)
	c := dialRaw(t, b.addr)
	for i := range 3 {
		rawProduce(c, "f", makeTestBatch(8, 1000), int32(i)) // about 8 KB each
	}
	alterQuota(t, admin, []quotaEnt{{"client-id", "raw"}}, "consumer_byte_rate", 10_000)
	fetch := func(offset int64, corr int32) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = 11, -1, 1<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "f"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		c.send(req, corr)
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 11
		if got, err := c.recv(resp, false); err != nil || got != corr {
			t.Fatalf("fetch: corr %d err %v", got, err)
		}
		return resp
	}
	// The response is capped at what the quota allows in a window
	// (10 KB): one batch of about 8 KB, not three.
	r := fetch(0, 10)
	recs := r.Topics[0].Partitions[0].RecordBatches
	if n := len(recs); n < 8000 || n > 10_000 || r.ThrottleMillis != 0 {
		t.Fatalf("first fetch: %d bytes, throttle %d", n, r.ThrottleMillis)
	}
	// 16 KB in about a second is over 10 KB/s: no records, a throttle.
	r = fetch(8, 11)
	if n := len(r.Topics[0].Partitions[0].RecordBatches); n != 0 || r.ThrottleMillis < 400 {
		t.Fatalf("second fetch: %d bytes, throttle %d", n, r.ThrottleMillis)
	}
}

func TestQuotaControllerMutations(t *testing.T) {
	b, admin := quotaBroker(t)
	// The default user (every client here is User:ANONYMOUS): 2
	// partitions/s, a burst of 2 windows of 1 s: 4.
	alterQuota(t, admin, []quotaEnt{{"user", ""}}, "controller_mutation_rate", 2)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	for _, name := range []string{"m1", "m2", "m3"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 3, 1
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(context.Background(), b.client(t))
	if err != nil {
		t.Fatal(err)
	}
	// m1 takes the burst to 1, m2 to -2, m3 is refused: 2 tokens at 2/s.
	codes := []int16{resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode, resp.Topics[2].ErrorCode}
	if codes[0] != 0 || codes[1] != 0 || codes[2] != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("codes %v, want 0 0 THROTTLING_QUOTA_EXCEEDED", codes)
	}
	// At most 1 s; less by what refilled while the topics were created
	// (metastore round trips, slow on a loaded machine).
	if resp.ThrottleMillis < 500 || resp.ThrottleMillis > 1000 {
		t.Fatalf("throttle %d ms, want about 1000", resp.ThrottleMillis)
	}
	// An old version is never refused, only throttled (Kafka's
	// permissive quota).
	c := dialRaw(t, b.addr)
	old := kmsg.NewPtrCreateTopicsRequest()
	old.Version = 5
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "m4", 1, 1
	old.Topics = append(old.Topics, rt)
	c.send(old, 1)
	oresp := kmsg.NewPtrCreateTopicsResponse()
	oresp.Version = 5
	if _, err := c.recv(oresp, true); err != nil || oresp.Topics[0].ErrorCode != 0 || oresp.ThrottleMillis == 0 {
		t.Fatalf("v5: %v %+v", err, oresp)
	}
}

func TestQuotaRequestPercentage(t *testing.T) {
	b, admin := quotaBroker(t)
	alterQuota(t, admin, []quotaEnt{{"client-id", "raw"}}, "request_percentage", 0.0001)
	c := dialRaw(t, b.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	c.send(req, 1)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	if _, err := c.recv(resp, true); err != nil {
		t.Fatal(err)
	}
	// Any request takes more than a microsecond of a 1e-6 share; the
	// throttle is bounded to one window (1 s), as in Kafka.
	if resp.ThrottleMillis != 1000 {
		t.Fatalf("throttle %d ms, want 1000", resp.ThrottleMillis)
	}
}

func TestQuotaConnectionCreationRate(t *testing.T) {
	b, admin := quotaBroker(t)
	alterQuota(t, admin, []quotaEnt{{"ip", "127.0.0.1"}}, "connection_creation_rate", 1)
	apiVersions := func() error {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			return err
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		c := &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
		req := kmsg.NewPtrApiVersionsRequest()
		c.send(req, 1)
		_, err = c.recv(kmsg.NewPtrApiVersionsResponse(), false)
		return err
	}
	if err := apiVersions(); err != nil {
		t.Fatalf("first connection: %v", err)
	}
	if err := apiVersions(); err == nil {
		t.Fatal("second connection within the second was served")
	}
}

func TestClientQuotasValidation(t *testing.T) {
	_, admin := quotaBroker(t)
	name := func(s string) *string { return &s }
	for _, tc := range []struct {
		what string
		ents []kmsg.AlterClientQuotasRequestEntryEntity
		key  string
		val  float64
	}{
		{"empty entity", nil, "producer_byte_rate", 1},
		{"unknown type", []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "group", Name: name("g")}}, "producer_byte_rate", 1},
		{"empty name", []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: name("")}}, "producer_byte_rate", 1},
		{"repeated type", []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: name("a")}, {Type: "user", Name: name("b")}}, "producer_byte_rate", 1},
		{"ip with user", []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "ip", Name: name("127.0.0.1")}, {Type: "user", Name: name("b")}}, "connection_creation_rate", 1},
		{"bad ip", []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "ip", Name: name("not-an-ip")}}, "connection_creation_rate", 1},
		{"ip key on a user", []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: name("a")}}, "connection_creation_rate", 1},
		{"unknown key", []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: name("a")}}, "bogus", 1},
		{"zero", []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: name("a")}}, "producer_byte_rate", -1},
		{"fraction of a byte", []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "client-id", Name: name("a")}}, "producer_byte_rate", 1.5},
	} {
		req := kmsg.NewPtrAlterClientQuotasRequest()
		e := kmsg.NewAlterClientQuotasRequestEntry()
		e.Entity = tc.ents
		e.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: tc.key, Value: tc.val}}
		req.Entries = append(req.Entries, e)
		resp, err := req.RequestWith(context.Background(), admin)
		if err != nil {
			t.Fatal(err)
		}
		if c := resp.Entries[0].ErrorCode; c != kerr.InvalidRequest.Code {
			t.Errorf("%s: %v, want INVALID_REQUEST", tc.what, kerr.ErrorForCode(c))
		}
	}

	// Describe: exact, default and any-specified matches, strict.
	alterQuota(t, admin, []quotaEnt{{"user", "alice"}}, "producer_byte_rate", 1000)
	alterQuota(t, admin, []quotaEnt{{"user", "alice"}, {"client-id", "app"}}, "request_percentage", 50)
	alterQuota(t, admin, []quotaEnt{{"client-id", ""}}, "consumer_byte_rate", 2000)
	describe := func(strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) (int, int16) {
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Components, req.Strict = comps, strict
		resp, err := req.RequestWith(context.Background(), admin)
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Entries), resp.ErrorCode
	}
	exact := kmsg.DescribeClientQuotasRequestComponent{EntityType: "user", MatchType: kmsg.QuotasMatchTypeExact, Match: name("alice")}
	anyClient := kmsg.DescribeClientQuotasRequestComponent{EntityType: "client-id", MatchType: kmsg.QuotasMatchTypeAny}
	defClient := kmsg.DescribeClientQuotasRequestComponent{EntityType: "client-id", MatchType: kmsg.QuotasMatchTypeDefault}
	for _, tc := range []struct {
		what   string
		strict bool
		comps  []kmsg.DescribeClientQuotasRequestComponent
		n      int
		code   int16
	}{
		{"everything", false, nil, 3, 0},
		{"user alice", false, []kmsg.DescribeClientQuotasRequestComponent{exact}, 2, 0},
		{"user alice only", true, []kmsg.DescribeClientQuotasRequestComponent{exact}, 1, 0},
		{"alice with any client", false, []kmsg.DescribeClientQuotasRequestComponent{exact, anyClient}, 1, 0},
		{"default client", true, []kmsg.DescribeClientQuotasRequestComponent{defClient}, 1, 0},
		{"type twice", false, []kmsg.DescribeClientQuotasRequestComponent{anyClient, defClient}, 0, kerr.InvalidRequest.Code},
		{"unknown type", false, []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "group", MatchType: kmsg.QuotasMatchTypeAny}}, 0, kerr.UnsupportedVersion.Code},
		{"exact null", false, []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: kmsg.QuotasMatchTypeExact}}, 0, kerr.InvalidRequest.Code},
	} {
		if n, code := describe(tc.strict, tc.comps...); n != tc.n || code != tc.code {
			t.Errorf("%s: %d entries, %v; want %d, %v", tc.what, n, kerr.ErrorForCode(code), tc.n, kerr.ErrorForCode(tc.code))
		}
	}
}
