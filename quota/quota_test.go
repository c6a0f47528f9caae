package quota

import (
	"testing"
	"time"

	"github.com/sluice-broker/sluice/metastore"
)

func TestResolvePrecedence(t *testing.T) {
	name := func(n string) metastore.QuotaName { return metastore.QuotaName{Set: true, Name: n} }
	def := metastore.QuotaName{Set: true, Default: true}
	ent := func(u, c metastore.QuotaName) metastore.QuotaEntity {
		return metastore.QuotaEntity{User: u, ClientID: c}
	}
	none := metastore.QuotaName{}
	// Level i of Kafka's precedence has the value i.
	levels := []metastore.QuotaEntity{
		1: ent(name("alice"), name("app")),
		2: ent(name("alice"), def),
		3: ent(name("alice"), none),
		4: ent(def, name("app")),
		5: ent(def, def),
		6: ent(def, none),
		7: ent(none, name("app")),
		8: ent(none, def),
	}
	keys := []Key{
		1: {User: "alice", ClientID: "app"}, 2: {User: "alice", ClientID: "app"}, 3: {User: "alice", ClientID: ""}, 4: {User: "alice", ClientID: "app"},
		5: {User: "alice", ClientID: "app"}, 6: {User: "alice", ClientID: ""}, 7: {User: "", ClientID: "app"}, 8: {User: "", ClientID: "app"},
	}
	for top := 1; top <= 8; top++ {
		// Configure levels top..8; the client resolves to level top.
		var qs []metastore.ClientQuota
		for i := top; i <= 8; i++ {
			qs = append(qs, metastore.ClientQuota{Entity: levels[i], Values: map[string]float64{ProducerByteRate: float64(i)}})
		}
		l := NewLimits(qs)
		bound, key, ok := l.Resolve(ProducerByteRate, "alice", "app")
		if !ok || bound != float64(top) || key != keys[top] {
			t.Errorf("levels %d..8: got %v %+v %v, want %d %+v", top, bound, key, ok, top, keys[top])
		}
		if _, _, ok := l.Resolve(ConsumerByteRate, "alice", "app"); ok {
			t.Errorf("levels %d..8: a consumer quota resolved from producer quotas", top)
		}
	}
	// Another user and client id only get the defaults.
	l := NewLimits([]metastore.ClientQuota{
		{Entity: levels[1], Values: map[string]float64{ProducerByteRate: 1}},
		{Entity: levels[8], Values: map[string]float64{ProducerByteRate: 8}},
	})
	if b, k, ok := l.Resolve(ProducerByteRate, "bob", "other"); !ok || b != 8 || k != (Key{ClientID: "other"}) {
		t.Errorf("bob/other: %v %+v %v", b, k, ok)
	}
	if _, _, ok := NewLimits(nil).Resolve(ProducerByteRate, "a", "b"); ok {
		t.Error("no quotas: resolved one")
	}
}

func TestRateThrottle(t *testing.T) {
	m := NewManager(Window{Samples: 11, Size: time.Second}, 0)
	k := Key{ClientID: "c"}
	t0 := time.UnixMilli(1_000_000)
	// A fresh sensor divides by at least 10 windows: 1000 bytes is 100/s.
	if d := m.Record(k, 100, 1000, t0); d != 0 {
		t.Fatalf("at the bound: throttled %v", d)
	}
	// 1100 over 10 s is 110/s: 10% over, for 10 s, is 1 s.
	if d := m.Record(k, 100, 100, t0); d != time.Second {
		t.Fatalf("10%% over: throttled %v, want 1s", d)
	}
	// Unrecording the last value brings it back under.
	m.Unrecord(k, 100, t0)
	if d := m.Record(k, 100, 0, t0); d != 0 {
		t.Fatalf("after unrecord: throttled %v", d)
	}
	// 12 s later every sample has expired.
	if d := m.Record(k, 100, 1000, t0.Add(12*time.Second)); d != 0 {
		t.Fatalf("after expiry: throttled %v", d)
	}
	// Steady 200/s for 15 s against 100/s: rate 200, throttle ~ one window.
	m2 := NewManager(Window{Samples: 11, Size: time.Second}, 0)
	var d time.Duration
	for i := range 150 {
		d = m2.Record(k, 100, 20, t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	if d < 9*time.Second || d > 12*time.Second {
		t.Fatalf("twice the bound for 15 s: throttle %v, want about one window span (10-12s)", d)
	}
	// request_percentage throttles are bounded.
	m3 := NewManager(Window{Samples: 11, Size: time.Second}, time.Second)
	if d := m3.Record(k, 1, 1e6, t0); d != time.Second {
		t.Fatalf("bounded throttle %v", d)
	}
}

func TestTokenBucket(t *testing.T) {
	m := NewManager(Window{Samples: 11, Size: time.Second}, 0)
	k := Key{User: "u"}
	t0 := time.UnixMilli(5_000)
	// Burst: 11 windows of 1 s at 10/s.
	if d, ok := m.Spend(k, 10, 110, true, t0); !ok || d != 0 {
		t.Fatalf("burst: %v %v", d, ok)
	}
	// At zero a strict request may still go below once.
	if d, ok := m.Spend(k, 10, 5, true, t0); !ok || d != 0 {
		t.Fatalf("at zero: %v %v", d, ok)
	}
	// Below zero: refused, 5 tokens at 10/s is 500 ms.
	if d, ok := m.Spend(k, 10, 1, true, t0); ok || d != 500*time.Millisecond {
		t.Fatalf("below zero: %v %v", d, ok)
	}
	if _, ok := m.Spend(k, 10, 1, true, t0.Add(500*time.Millisecond)); !ok {
		t.Fatal("refilled: refused")
	}
	// Permissive: always taken, throttled once below zero.
	if d, ok := m.Spend(k, 10, 20, false, t0.Add(500*time.Millisecond)); !ok || d != 2100*time.Millisecond {
		t.Fatalf("permissive: %v %v", d, ok)
	}
}
