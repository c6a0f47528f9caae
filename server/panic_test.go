package server

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHandlerPanicClosesOnlyItsConnection makes two handlers panic, one in
// its first stage and one in a second stage (rc.later), on a running
// broker: each closes the connection that sent the request, pipelined
// requests before it answered, is counted by API, and every other client,
// a franz-go one among them, goes on being served. Without the recovery
// the first panic ends the test binary.
func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	const first, second = int16(16), int16(15) // ListGroups, DescribeGroups
	saved := map[int16]handler{first: handlers[first], second: handlers[second]}
	handlers[first] = func(*Server, *reqCtx, kmsg.Request) (kmsg.Response, error) {
		panic("first stage fault")
	}
	handlers[second] = func(_ *Server, rc *reqCtx, _ kmsg.Request) (kmsg.Response, error) {
		rc.later(func() kmsg.Response {
			var m map[string]int
			m["x"] = 1 // a nil map write: a runtime panic
			return nil
		})
		return nil, nil
	}
	t.Cleanup(func() { // after the broker has closed (cleanups run last first)
		for k, h := range saved {
			handlers[k] = h
		}
	})
	b := startBroker(t, nil)

	// A bystander connection opened before the faults.
	bystander := dialRaw(t, b.addr)
	bystander.send(kmsg.NewPtrApiVersionsRequest(), 1)
	if _, err := bystander.recv(kmsg.NewPtrApiVersionsResponse(), false); err != nil {
		t.Fatal(err)
	}

	for i, key := range []int16{first, second} {
		c := dialRaw(t, b.addr)
		// An ApiVersions pipelined before the faulting request is
		// answered; then the connection closes, without waiting for a
		// deadline.
		c.send(kmsg.NewPtrApiVersionsRequest(), 10)
		req := kmsg.RequestForKey(key)
		req.SetVersion(0)
		c.send(req, 11)
		if corr, err := c.recv(kmsg.NewPtrApiVersionsResponse(), false); err != nil || corr != 10 {
			t.Fatalf("%s: pipelined ApiVersions: corr %d, %v", apiName(key), corr, err)
		}
		start := time.Now()
		_, err := c.recv(kmsg.NewPtrApiVersionsResponse(), false)
		var ne net.Error
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("%s: connection not closed after its handler panicked: %v (after %v)", apiName(key), err, time.Since(start))
		}
		if got := counterValue(b.srv.metrics.panics.WithLabelValues(apiName(key))); got != 1 {
			t.Fatalf("%s: sluice_request_panics_total = %v, want 1 (%d)", apiName(key), got, i)
		}
	}

	// The bystander and a new franz-go client are served.
	bystander.send(kmsg.NewPtrApiVersionsRequest(), 2)
	if corr, err := bystander.recv(kmsg.NewPtrApiVersionsResponse(), false); err != nil || corr != 2 {
		t.Fatalf("bystander: corr %d, %v", corr, err)
	}
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatalf("metadata after the panics: %v", err)
	}
}
