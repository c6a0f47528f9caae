package server

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-broker/sluice/metastore"
)

// Catalog is what the broker needs from the metadata quorum: topics, their
// configs, dynamic broker configs and producer-id blocks. metastore.Client
// implements it; reads come from the client's local cache, which follows the
// quorum's change stream, so they never wait on the network. Writes return
// once the change is committed and visible in the local cache.
type Catalog interface {
	ClusterID() string
	// Brokers are the registered brokers.
	Brokers() []metastore.Broker

	Topics() []metastore.Topic
	TopicByName(name string) (metastore.Topic, bool)
	TopicByID(id metastore.TopicID) (metastore.Topic, bool)
	// Sync waits until the cache holds every write committed before the
	// call (a read barrier through the metastore's leader).
	Sync(ctx context.Context) error

	// CreateTopic fails with metastore.ErrTopicExists if the name is taken.
	CreateTopic(ctx context.Context, spec metastore.TopicSpec) (metastore.Topic, error)
	// DeleteTopic fails with metastore.ErrUnknownTopic.
	DeleteTopic(ctx context.Context, id metastore.TopicID) error
	// CreatePartitions grows the topic to total partitions;
	// metastore.ErrInvalidPartitions if total is not larger than now.
	CreatePartitions(ctx context.Context, name string, total int32) (metastore.Topic, error)
	// SetPartitionLimit makes the two above fail with
	// metastore.ErrPartitionLimit, where they are applied, when the
	// cluster would hold more partitions than n: the server sets it to
	// max.partitions, so that creations racing past its own check (two
	// brokers, or two requests at once) are refused all the same.
	SetPartitionLimit(n int64)
	// AlterTopicConfigs sets the keys in set and removes those in del.
	AlterTopicConfigs(ctx context.Context, name string, set map[string]string, del []string) error

	// BrokerConfigs are the dynamic broker configs: broker -1 holds the
	// cluster-wide defaults, any other id that broker's own.
	BrokerConfigs(broker int32) map[string]string
	AlterBrokerConfigs(ctx context.Context, broker int32, set map[string]string, del []string) error
	// GroupConfigs are a group's dynamic configs (the GROUP config
	// resource); GroupConfig one of them.
	GroupConfigs(group string) map[string]string
	GroupConfig(group, key string) (string, bool)
	AlterGroupConfigs(ctx context.Context, group string, set map[string]string, del []string) error

	// AllocateProducerIDs reserves count consecutive producer ids and
	// returns the first.
	AllocateProducerIDs(ctx context.Context, count int64) (int64, error)

	// ClientQuotas are the client quotas set, and a generation that
	// changes when they do; the slice is shared, not to be modified.
	ClientQuotas() (uint64, []metastore.ClientQuota)
	AlterClientQuotas(ctx context.Context, changes []metastore.QuotaChange) error
}

// catalogSync makes the cache current for the topic checks of one
// CreateTopics, DeleteTopics or CreatePartitions request: whether a topic
// exists and how many partitions it has are then read as of a moment
// after the request arrived, as Kafka's controller reads them, and not
// from a cache that may lag (a broker cut off from the metastore, or one
// that has not yet seen a change made through another broker). The
// barrier is taken once, when the first topic needs it, and waits at most
// half the request's timeout (5 s when it gives none); an error means the
// topic's state is unknown here, answered REQUEST_TIMED_OUT.
func (s *Server) catalogSync(rc *reqCtx, timeoutMs int32) func() error {
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			wait := 5 * time.Second
			if timeoutMs > 0 {
				wait = max(time.Duration(timeoutMs)*time.Millisecond/2, 500*time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(rc.ctx(), wait)
			defer cancel()
			err = s.catalog.Sync(ctx)
		})
		return err
	}
}

// catalogSyncMessage is the error message of a topic the barrier failed for.
const catalogSyncMessage = "the metastore could not be reached to read the topic's current state"
