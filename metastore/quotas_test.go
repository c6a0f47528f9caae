package metastore

import (
	"reflect"
	"testing"
)

func TestClientQuotasStoredAndReloaded(t *testing.T) {
	dir := t.TempDir()
	n := openSingle(t, dir)
	c := n.Client()
	ctx := ctxT(t)

	alice := QuotaEntity{User: QuotaName{Set: true, Name: "alice"}}
	anyClient := QuotaEntity{ClientID: QuotaName{Set: true, Default: true}}
	gen0, qs := c.ClientQuotas()
	if len(qs) != 0 {
		t.Fatalf("fresh store has quotas %+v", qs)
	}
	if err := c.AlterClientQuotas(ctx, []QuotaChange{
		{Entity: alice, Set: map[string]float64{"producer_byte_rate": 1024, "request_percentage": 50}},
		{Entity: anyClient, Set: map[string]float64{"consumer_byte_rate": 2048}},
	}); err != nil {
		t.Fatal(err)
	}
	gen1, qs := c.ClientQuotas()
	if gen1 == gen0 || len(qs) != 2 {
		t.Fatalf("after alter: gen %d -> %d, %+v", gen0, gen1, qs)
	}
	// Remove one key of alice and all of the default client's.
	if err := c.AlterClientQuotas(ctx, []QuotaChange{
		{Entity: alice, Del: []string{"request_percentage"}},
		{Entity: anyClient, Del: []string{"consumer_byte_rate"}},
	}); err != nil {
		t.Fatal(err)
	}
	want := []ClientQuota{{Entity: alice, Values: map[string]float64{"producer_byte_rate": 1024}}}
	if _, qs = c.ClientQuotas(); !reflect.DeepEqual(qs, want) {
		t.Fatalf("after delete: %+v, want %+v", qs, want)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openSingle(t, dir)
	if _, qs = n.Client().ClientQuotas(); !reflect.DeepEqual(qs, want) {
		t.Fatalf("after restart: %+v, want %+v", qs, want)
	}
}
