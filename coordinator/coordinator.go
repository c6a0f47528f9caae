package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metastore"
)

// Store is what the coordinator needs from the metadata quorum.
// *metastore.Client implements it. Every call blocks until the quorum
// answered; reads of offsets and groups are linearizable, topic lookups
// come from the local cache.
type Store interface {
	// The writes carry the coordinator's fence (metastore.Fence): the
	// metastore refuses them with metastore.ErrFenced once this broker
	// no longer owns the group under its current lease.
	CommitOffsets(ctx context.Context, f metastore.Fence, group string, offsets []metastore.OffsetCommit) error
	// FetchOffsets returns the committed offsets of tps (nil: all of the
	// group's); partitions without a commit are left out.
	FetchOffsets(ctx context.Context, group string, tps []metastore.TopicPartition) ([]metastore.OffsetCommit, error)
	DeleteOffsets(ctx context.Context, f metastore.Fence, group string, tps []metastore.TopicPartition) error
	// SaveGroup stores the group's encoded metadata (persist.go).
	SaveGroup(ctx context.Context, f metastore.Fence, group string, state []byte) error
	// LoadGroup fails with metastore.ErrUnknownGroup if nothing was saved.
	LoadGroup(ctx context.Context, group string) ([]byte, error)
	// DeleteGroup removes metadata, offsets and ownership at once.
	DeleteGroup(ctx context.Context, f metastore.Fence, group string) error
	// ListGroups names every group with metadata or offsets.
	ListGroups(ctx context.Context) ([]string, error)
	// ClaimGroup makes f.Broker the owner unless a live broker owns the
	// group, and returns the owner.
	ClaimGroup(ctx context.Context, group string, f metastore.Fence) (int32, error)
	// SaveShareState stores one share-partition's state (share_partition.go);
	// LoadShareStates reads all of a group's. DeleteGroup removes them.
	SaveShareState(ctx context.Context, f metastore.Fence, group string, topic metastore.TopicID, partition int32, state []byte) error
	// SaveClaimedShareState is SaveShareState fenced by the
	// share-partition's claim (ClaimSharePartition) instead of the
	// group's owner; ReleaseSharePartition ends a claim.
	SaveClaimedShareState(ctx context.Context, f metastore.Fence, group string, topic metastore.TopicID, partition int32, state []byte) error
	ClaimSharePartition(ctx context.Context, group string, topic metastore.TopicID, partition int32, f metastore.Fence) (int32, error)
	ReleaseSharePartition(ctx context.Context, group string, topic metastore.TopicID, partition int32, f metastore.Fence) error
	// SharePartitionHolder reads the stored claim of a share-partition.
	SharePartitionHolder(ctx context.Context, group string, topic metastore.TopicID, partition int32) (metastore.Fence, bool, error)
	LoadShareStates(ctx context.Context, group string) ([]metastore.ShareState, error)
	// Brokers are the registered (live) brokers, from the local cache.
	Brokers() []metastore.Broker

	Topics() []metastore.Topic
	TopicByName(name string) (metastore.Topic, bool)
	TopicByID(id metastore.TopicID) (metastore.Topic, bool)
}

// Config tunes the coordinator; zero fields take Kafka's defaults.
type Config struct {
	// BrokerID is this broker: the owner it claims groups for.
	BrokerID int32
	// NoGroups marks a broker without the read role: it coordinates no
	// group itself (every group request answers NOT_COORDINATOR) but
	// still places groups on read brokers for FindCoordinator.
	NoGroups bool
	Store    Store
	// Incarnation returns this broker's current lease incarnation: the
	// fence of its claims and group writes. nil or 0: unfenced (tests).
	Incarnation func() uint64
	// LeaseValid says whether this broker's lease certainly still holds;
	// while it does not, no group is served (NOT_COORDINATOR), since
	// another broker may have taken it over. nil: always.
	LeaseValid func() bool
	Clock      Clock // nil: RealClock
	Logger     zerolog.Logger

	// MinSessionTimeout and MaxSessionTimeout bound a classic member's
	// session timeout (group.min/max.session.timeout.ms: 6s, 30m).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxGroupSize caps a classic group's members, pending ones
	// included (group.max.size); ConsumerMaxGroupSize a KIP-848 group's
	// (group.consumer.max.size). A new member beyond either gets
	// GROUP_MAX_SIZE_REACHED. Both default to Kafka's 2147483647.
	MaxGroupSize, ConsumerMaxGroupSize int
	// ConsumerSessionTimeout and ConsumerHeartbeatInterval are the KIP-848
	// group.consumer.session.timeout.ms (45s) and
	// group.consumer.heartbeat.interval.ms (5s).
	ConsumerSessionTimeout, ConsumerHeartbeatInterval time.Duration
	// StoreTimeout bounds a metastore call made outside a request (a
	// timer's persist). Default 10s.
	StoreTimeout time.Duration
	// CommitTimeout is offsets.commit.timeout.ms: how long an
	// OffsetCommit waits for its metastore write (and for the group's
	// earlier offset writes) before it answers COORDINATOR_NOT_AVAILABLE.
	// Default 5s, Kafka's.
	CommitTimeout time.Duration
	// OffsetsRetention is offsets.retention.minutes: how long committed
	// offsets outlive their group's use of them (expire.go). Default
	// 7 days; negative never expires them.
	OffsetsRetention time.Duration
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: the first
	// rebalance of an empty classic group waits this long for more
	// members, again while new ones keep arriving, up to the rebalance
	// timeout (Kafka's InitialDelayedJoin). 0: none (the zero value; the
	// broker passes Kafka's 3 s default).
	InitialRebalanceDelay time.Duration

	// Share groups (KIP-932, share.go): the broker's
	// group.share.record.lock.duration.ms (30s),
	// group.share.delivery.count.limit (5) and
	// group.share.partition.max.record.locks (2000);
	// group.share.session.timeout.ms (45s) and
	// group.share.heartbeat.interval.ms (5s).
	Share                                       ShareLimits
	ShareSessionTimeout, ShareHeartbeatInterval time.Duration
	// ShareMaxGroupSize is group.share.max.size (200).
	ShareMaxGroupSize int
	// ShareCheckMembers says this broker coordinates every share group
	// whose partitions it holds (a single node), so ShareFetch and
	// ShareAcknowledge check the member against the group; in a cluster
	// the holder does not ask the group's coordinator, as Kafka's
	// share-partition leader does not.
	ShareCheckMembers bool
	// GroupConfig returns a group's dynamic config (Kafka's GROUP config
	// resource: share.auto.offset.reset, share.record.lock.duration.ms),
	// ok false when unset. nil: none set.
	GroupConfig func(group, key string) (string, bool)
}

func (c *Config) defaults() {
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.MaxGroupSize == 0 {
		c.MaxGroupSize = math.MaxInt32
	}
	if c.ConsumerMaxGroupSize == 0 {
		c.ConsumerMaxGroupSize = math.MaxInt32
	}
	if c.ConsumerSessionTimeout == 0 {
		c.ConsumerSessionTimeout = 45 * time.Second
	}
	if c.ConsumerHeartbeatInterval == 0 {
		c.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = 10 * time.Second
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = 5 * time.Second
	}
	if c.Share.LockDuration == 0 {
		c.Share.LockDuration = 30 * time.Second
	}
	if c.Share.DeliveryLimit == 0 {
		c.Share.DeliveryLimit = 5
	}
	if c.Share.MaxLocks == 0 {
		c.Share.MaxLocks = 2000
	}
	if c.ShareMaxGroupSize == 0 {
		c.ShareMaxGroupSize = 200
	}
	if c.ShareSessionTimeout == 0 {
		c.ShareSessionTimeout = 45 * time.Second
	}
	if c.ShareHeartbeatInterval == 0 {
		c.ShareHeartbeatInterval = 5 * time.Second
	}
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = 10080 * time.Minute
	}
}

// Client identifies the connection a request came from.
type Client struct {
	ID   string // client.id from the request header
	Host string // remote address
	// Principal is the connection's authenticated principal
	// ("User:name"); with Host it is what a KIP-848 member's regex
	// subscription is authorized as (SetTopicAuthorizer).
	Principal string
}

// Coordinator is the group coordinator of one broker. It is safe for
// concurrent use; see doc.go for the locking.
type Coordinator struct {
	cfg   Config
	store Store
	clock Clock
	log   zerolog.Logger

	// rebalances counts generation (classic) and group epoch (KIP-848)
	// bumps of the groups coordinated here, for the metrics endpoint.
	rebalances atomic.Int64

	// describe says whether a principal at a host may DESCRIBE a topic
	// (SetTopicAuthorizer); nil: every topic.
	describe atomic.Pointer[func(principal, host, topic string) bool]

	mu struct {
		sync.Mutex
		groups map[string]*group
		owned  map[string]bool
		// loading: groups whose claim and first load (metastore round
		// trips, made without mu) are under way; closed when done.
		loading map[string]chan struct{}
		closed  bool
	}

	// share holds the share-partition tables and share sessions of this
	// broker (share_holder.go).
	share shareHolder
}

// SetTopicAuthorizer installs the check that filters the topics a KIP-848
// regex subscription reaches: f reports whether principal, connecting from
// host (an IP address), may DESCRIBE topic. The server installs it when an
// authorizer is configured; without one a regex reaches every topic.
func (c *Coordinator) SetTopicAuthorizer(f func(principal, host, topic string) bool) {
	if f == nil {
		c.describe.Store(nil)
		return
	}
	c.describe.Store(&f)
}

// mayDescribe applies the topic authorizer; host may carry the "/" that
// DescribeGroups shows.
func (c *Coordinator) mayDescribe(principal, host, topic string) bool {
	f := c.describe.Load()
	return f == nil || (*f)(principal, strings.TrimPrefix(host, "/"), topic)
}

func (c *Coordinator) leaseValid() bool { return c.cfg.LeaseValid == nil || c.cfg.LeaseValid() }

// fence is what this coordinator's claims and group writes carry.
func (c *Coordinator) fence() metastore.Fence {
	f := metastore.Fence{Broker: c.cfg.BrokerID}
	if c.cfg.Incarnation != nil {
		f.Incarnation = c.cfg.Incarnation()
	}
	return f
}

// DropAll unloads every group and forgets which it owned: called when
// this broker's lease lapsed, since another broker may own its groups
// now. Waiting requests are answered NOT_COORDINATOR; a later request
// claims the group again under the new lease.
func (c *Coordinator) DropAll() {
	c.mu.Lock()
	gs := c.mu.groups
	c.mu.groups = map[string]*group{}
	c.mu.owned = map[string]bool{}
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		g.unloadLocked(kerr.NotCoordinator.Code)
		g.mu.Unlock()
	}
	if len(gs) > 0 {
		c.log.Warn().Int("groups", len(gs)).Msg("lease lapsed: dropped every group")
	}
	c.shareDropAll()
}

// fenced handles a group write the metastore refused with ErrFenced: this
// broker no longer owns the group, so its copy goes. It may be called
// with g.mu held, so the unload runs on its own goroutine (lock order).
func (c *Coordinator) fenced(g *group) {
	c.log.Warn().Str("group", g.name).Msg("group write fenced: another broker owns the group now")
	go func() {
		c.mu.Lock()
		if c.mu.groups[g.name] == g {
			delete(c.mu.groups, g.name)
			delete(c.mu.owned, g.name)
		}
		c.mu.Unlock()
		g.mu.Lock()
		g.unloadLocked(kerr.NotCoordinator.Code)
		g.mu.Unlock()
	}()
}

// New returns a coordinator; it loads groups lazily, on first use.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Store == nil {
		return nil, errors.New("coordinator: Store is required")
	}
	cfg.defaults()
	c := &Coordinator{cfg: cfg, store: cfg.Store, clock: cfg.Clock,
		log: cfg.Logger.With().Str("component", "coordinator").Logger()}
	c.mu.groups = make(map[string]*group)
	c.mu.owned = make(map[string]bool)
	c.mu.loading = make(map[string]chan struct{})
	c.share.init()
	return c, nil
}

// Close stops every group's timers and answers requests waiting in a
// rebalance with NOT_COORDINATOR. Group state stays in the metastore.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	c.mu.closed = true
	gs := c.mu.groups
	c.mu.groups = map[string]*group{}
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		g.unloadLocked(kerr.NotCoordinator.Code)
		g.mu.Unlock()
	}
	return nil
}

// Claim makes this broker the group's coordinator unless another live
// broker owns it, and returns the owner (FindCoordinator).
//
// A group this coordinator already owns is answered from memory: claims
// are metastore writes, and kadm or a restarting consumer asks for the
// coordinator often. Ownership is kept while this broker's registration
// lives (a fenced broker stops serving altogether).
func (c *Coordinator) Claim(ctx context.Context, group string) (int32, error) {
	c.mu.Lock()
	owned := c.mu.owned[group]
	c.mu.Unlock()
	if owned && c.leaseValid() {
		return c.cfg.BrokerID, nil
	}
	candidate, err := c.placement(group)
	if err != nil {
		return -1, err
	}
	// The claim records the owner's incarnation: this broker's own, or
	// the candidate's as the catalog knows it (the metastore refuses a
	// stale one).
	f := metastore.Fence{Broker: candidate, OnBehalf: true}
	if candidate == c.cfg.BrokerID {
		f = c.fence()
	} else {
		for _, b := range c.store.Brokers() {
			if b.ID == candidate {
				f.Incarnation = b.Incarnation
			}
		}
	}
	owner, err := c.store.ClaimGroup(ctx, group, f)
	if err != nil {
		return -1, err
	}
	c.mu.Lock()
	if owner == c.cfg.BrokerID {
		c.mu.owned[group] = true
	} else if c.mu.owned[group] {
		// Ownership moved: drop our copy, the new owner rebuilds it.
		delete(c.mu.owned, group)
		if g := c.mu.groups[group]; g != nil {
			delete(c.mu.groups, group)
			g.mu.Lock()
			g.unloadLocked(kerr.NotCoordinator.Code)
			g.mu.Unlock()
		}
	}
	c.mu.Unlock()
	return owner, nil
}

// placement picks the broker a new group should live on: the live read
// brokers (read or combined role) are ranked by a hash of the group id and
// the broker id (rendezvous hashing), so groups spread evenly and only the
// groups of a broker that leaves move. With no read broker registered
// (tests, start-up) this broker takes it, if it has the read role.
func (c *Coordinator) placement(group string) (int32, error) {
	best, bestScore, found := int32(-1), uint64(0), false
	// Decommissioned brokers take no new group (metastore/decommission.go);
	// a Store without the notion has none.
	var dec []int32
	if d, ok := c.store.(interface{ Decommissioned() []int32 }); ok {
		dec = d.Decommissioned()
	}
	for _, b := range c.store.Brokers() {
		if (b.Role != metastore.RoleRead && b.Role != metastore.RoleCombined) || b.ShuttingDown || slices.Contains(dec, b.ID) {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(group))
		h.Write([]byte{byte(b.ID >> 24), byte(b.ID >> 16), byte(b.ID >> 8), byte(b.ID)})
		if score := h.Sum64(); !found || score > bestScore {
			best, bestScore, found = b.ID, score, true
		}
	}
	switch {
	case found:
		return best, nil
	case !c.cfg.NoGroups:
		return c.cfg.BrokerID, nil
	}
	return -1, ErrNoReadBroker
}

// ErrNoReadBroker: no live broker can coordinate a group.
var ErrNoReadBroker = errors.New("coordinator: no live read broker to coordinate the group")

// lookup modes for getGroup.
const (
	lookupExisting = iota // nil if the group has no metadata and no offsets
	lookupCreate          // an empty classic group if none exists
)

// getGroup returns the group, loading it from the metastore on first use.
// The error is a Kafka code: NOT_COORDINATOR when another broker owns the
// group, COORDINATOR_NOT_AVAILABLE when the metastore cannot answer,
// GROUP_ID_NOT_FOUND (lookupExisting) when it does not exist.
func (c *Coordinator) getGroup(ctx context.Context, name string, mode int) (*group, int16) {
	if name == "" {
		return nil, kerr.InvalidGroupID.Code
	}
	if !c.leaseValid() {
		return nil, kerr.NotCoordinator.Code
	}
	for {
		c.mu.Lock()
		if c.mu.closed || c.cfg.NoGroups {
			c.mu.Unlock()
			return nil, kerr.NotCoordinator.Code
		}
		if g := c.mu.groups[name]; g != nil && c.mu.owned[name] {
			c.mu.Unlock()
			return g, 0
		}
		wait, busy := c.mu.loading[name]
		if !busy {
			done := make(chan struct{})
			c.mu.loading[name] = done
			owned := c.mu.owned[name]
			c.mu.Unlock()
			g, code := c.loadGroup(ctx, name, mode, owned)
			c.mu.Lock()
			delete(c.mu.loading, name)
			if code == 0 && g != nil {
				if c.mu.closed {
					code, g = kerr.NotCoordinator.Code, nil
				} else {
					c.mu.owned[name] = true
					c.mu.groups[name] = g
				}
			}
			c.mu.Unlock()
			close(done)
			return g, code
		}
		c.mu.Unlock()
		// Another request is loading this group: wait for it, then look
		// again. Other groups are not held up meanwhile.
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, kerr.CoordinatorNotAvailable.Code
		}
	}
}

// loadGroup claims the group for this broker (unless it owns it already)
// and loads its stored state: metastore round trips, made without
// Coordinator.mu (getGroup keeps other requests for the same group waiting
// meanwhile).
func (c *Coordinator) loadGroup(ctx context.Context, name string, mode int, owned bool) (*group, int16) {
	if !owned {
		owner, err := c.store.ClaimGroup(ctx, name, c.fence())
		if err != nil {
			return nil, storeCode(err)
		}
		if owner != c.cfg.BrokerID {
			return nil, kerr.NotCoordinator.Code
		}
	}
	g := newGroup(c, name)
	blob, err := c.store.LoadGroup(ctx, name)
	switch {
	case err == nil:
		if err := g.restore(blob); err != nil {
			c.log.Error().Err(err).Str("group", name).Msg("stored group state does not decode; starting it empty")
			g = newGroup(c, name)
		}
	case errors.Is(err, metastore.ErrUnknownGroup):
		if mode == lookupExisting {
			offs, err := c.store.FetchOffsets(ctx, name, nil)
			if err != nil {
				return nil, storeCode(err)
			}
			if len(offs) == 0 {
				return nil, kerr.GroupIDNotFound.Code
			}
		}
	default:
		return nil, storeCode(err)
	}
	return g, 0
}

// forget drops a deleted group from memory. Lock order: c.mu, then g.mu.
func (c *Coordinator) forget(g *group) {
	if c.mu.groups[g.name] == g {
		delete(c.mu.groups, g.name)
	}
	delete(c.mu.owned, g.name)
}

// storeCode maps a metastore error to the Kafka code a client retries on.
func storeCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, metastore.ErrTimeout), errors.Is(err, metastore.ErrNotLeader),
		errors.Is(err, metastore.ErrUnreachable), errors.Is(err, metastore.ErrStopped):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, metastore.ErrUnknownBroker):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, metastore.ErrOvertaken):
		// A commit a later one of this coordinator overtook in the
		// metastore (not written); its caller had normally given up.
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, metastore.ErrFenced):
		// Another broker may own the group now (this one's lease
		// lapsed): the client looks the coordinator up again.
		return kerr.NotCoordinator.Code
	}
	return kerr.UnknownServerError.Code
}

// storeCtx bounds a metastore call made on behalf of a timer.
func (c *Coordinator) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.cfg.StoreTimeout)
}

// newMemberID is Kafka's format: the client id (or the instance id of a
// static member), a dash and a random UUID.
func newMemberID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return prefix + "-" + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
