package server

import (
	"testing"

	"github.com/sluice-broker/sluice/metastore"
)

// TestForwardTarget: the listener inter-broker requests go to, and the one
// Metadata names for each broker, on a write broker with a plaintext
// internal listener and a SASL_SSL client listener, both of the write
// view, and a read listener.
func TestForwardTarget(t *testing.T) {
	b := metastore.Broker{ID: 2, Role: metastore.RoleWrite, Endpoints: []metastore.Endpoint{
		{Name: "READ", View: "read", Host: "h", Port: 9192, Protocol: "SASL_SSL"},
		{Name: "CLIENT", View: "write", Host: "h", Port: 9093, Protocol: "SASL_SSL"},
		{Name: "BROKER", View: "write", Host: "h", Port: 9094, Protocol: "SSL"},
		{Name: "replication", View: "internal", Host: "h", Port: 9491},
	}}
	for _, tc := range []struct {
		name string
		want int32 // port; 0: none
	}{
		{"", 9093},         // the first of the write or mixed view
		{"broker", 9094},   // by name, any case
		{"BROKER", 9094},   //
		{"READ", 0},        // a read listener cannot lead the client to leaders
		{"replication", 0}, // nor the internal port
		{"NONE", 0},
	} {
		ep, ok := forwardTarget(b, tc.name)
		if got := map[bool]int32{true: ep.Port}[ok]; got != tc.want {
			t.Errorf("forwardTarget(%q) = %+v, %v; want port %d", tc.name, ep, ok, tc.want)
		}
	}
	// Metadata on BROKER names the peer's BROKER listener, on another
	// write listener the first one of the view.
	if ep, ok := viewEndpoint(b, "BROKER", "write"); !ok || ep.Port != 9094 {
		t.Errorf("viewEndpoint(BROKER) = %+v, %v", ep, ok)
	}
	if ep, ok := viewEndpoint(b, "WRITE", "write"); !ok || ep.Port != 9093 {
		t.Errorf("viewEndpoint(WRITE) = %+v, %v", ep, ok)
	}
	if _, ok := viewEndpoint(b, "X", "mixed"); ok {
		t.Error("viewEndpoint found a mixed listener")
	}
}
