package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestCreateTopicsBeforeRegistration: Metadata lists a broker as soon as
// its listener is up, so a client may ask it to create a topic before the
// broker's registration reached its view of the metastore. The request
// waits for it instead of failing with INVALID_REPLICATION_FACTOR ("larger
// than available brokers: 0").
func TestCreateTopicsBeforeRegistration(t *testing.T) {
	b := startUnregistered(t, nil, nil)
	go func() {
		time.Sleep(300 * time.Millisecond)
		b.register(t)
	}()
	adm := kadm.NewClient(b.client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 1, 1, nil, "early")
	if err != nil {
		t.Fatalf("CreateTopics before the broker's registration was visible: %v", err)
	}
	if resp.Err != nil {
		t.Fatalf("CreateTopics before the broker's registration was visible: %v (%s)", resp.Err, resp.ErrMessage)
	}
}
