package metastore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Client is what brokers use: the server.Catalog interface plus brokers,
// leases, offsets, group state and coordinator placement. Reads of topics,
// brokers, broker configs and the cluster id come from a local cache (the
// view): the node's own for an embedded client, one kept by a watch for a
// remote client. Writes return once applied and visible in that cache.
// Offsets and group state are read linearizably (ReadIndex).
//
// All methods are safe for concurrent use. Many concurrent CommitOffsets
// calls are grouped into one raft proposal by the node (group commit).
type Client struct {
	// partitionLimit is stamped on the topic and partition creations this
	// client proposes (SetPartitionLimit).
	partitionLimit atomic.Int64
	b              backend
	v              *view
	timeout        time.Duration
	stopOnce       sync.Once
	stop           func()
	// pull, for a remote client, fetches the watch events up to now into
	// the cache at once (Sync) instead of waiting for the long-poll.
	pull func(ctx context.Context) error
}

// backend carries requests to a node: the node itself (localBackend) or a
// remote node over TCP (remote.go).
type backend interface {
	do(ctx context.Context, req *Request) (*Response, error)
}

type localBackend struct{ n *Node }

func (l localBackend) do(ctx context.Context, req *Request) (*Response, error) {
	return l.n.HandleRequest(ctx, req), nil
}

func newClient(b backend, v *view, stop func()) *Client {
	return &Client{b: b, v: v, timeout: 10 * time.Second, stop: stop}
}

// Close releases a remote client's connections and watch. Closing an
// embedded client does nothing (close the Node).
func (c *Client) Close() error {
	c.stopOnce.Do(func() {
		if c.stop != nil {
			c.stop()
		}
	})
	return nil
}

func (c *Client) call(ctx context.Context, req *Request) (*Response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMs = max(time.Until(dl).Milliseconds(), 1)
	}
	resp, err := c.b.do(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := codeErr(resp.Err); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return resp, nil
}

// write proposes one command and waits until its effect is in the cache.
func (c *Client) write(ctx context.Context, cmd command) (result, error) {
	t0 := time.Now()
	resp, err := c.call(ctx, &Request{Kind: reqCmd, Cmd: &cmd})
	if err != nil {
		return result{}, err
	}
	r := resp.Result
	if r == nil {
		return result{}, ErrInvalidRequest
	}
	if err := codeErr(r.Err); err != nil {
		return *r, err
	}
	if r.Visible {
		if err := c.waitVisible(ctx, r.Rev); err != nil {
			return *r, err
		}
	}
	observeWrite(t0)
	return *r, nil
}

// waitVisible waits until the cache reached rev. A remote client whose
// watch is stuck on an unreachable node pulls from the next one.
func (c *Client) waitVisible(ctx context.Context, rev uint64) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		err := c.v.waitRev(wctx, rev)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ErrTimeout
		}
		if c.pull != nil {
			_ = c.pull(ctx)
		}
	}
}

func (c *Client) read(ctx context.Context, r *readRequest) (*Response, error) {
	return c.call(ctx, &Request{Kind: reqRead, Read: r})
}

func now() int64 { return time.Now().UnixMilli() }

// ---- server.Catalog ----

// ClusterID is the cluster's UUID, made once by the first leader ("" until
// then).
func (c *Client) ClusterID() string { return c.v.ClusterID() }

// BrokerLease is the broker lease the cluster's metastore expires brokers
// by (broker_lease.go); 0 until the cache holds a cluster that recorded
// one.
func (c *Client) BrokerLease() time.Duration { return c.v.BrokerLease() }

// Topics lists all topics from the cache, sorted by name.
func (c *Client) Topics() []Topic { return c.v.Topics() }

// TopicByName looks a topic up in the cache.
func (c *Client) TopicByName(name string) (Topic, bool) { return c.v.TopicByName(name) }

// TopicByID looks a topic up in the cache.
func (c *Client) TopicByID(id TopicID) (Topic, bool) { return c.v.TopicByID(id) }

// CreateTopic creates a topic with a random id, placing partitions over the
// registered brokers (apply.go placePartitions). ErrTopicExists if taken.
func (c *Client) CreateTopic(ctx context.Context, spec TopicSpec) (Topic, error) {
	id := newTopicID()
	r, err := c.write(ctx, command{Op: opCreateTopic, Spec: &spec, TopicID: &id, NowMs: now(), MaxPartitions: c.partitionLimit.Load()})
	if err != nil {
		return Topic{}, err
	}
	return cloneTopic(*r.Topic), nil
}

// DeleteTopic deletes a topic; ErrUnknownTopic if there is none.
func (c *Client) DeleteTopic(ctx context.Context, id TopicID) error {
	_, err := c.write(ctx, command{Op: opDeleteTopic, TopicID: &id})
	return err
}

// SetPartitionLimit bounds the partitions of the whole cluster for the
// topics and partitions this client creates from now on (0: unbounded):
// the bound travels in each command and is checked where it is applied,
// against the partitions the metastore holds then, so that creations
// racing from several brokers cannot pass it together
// (ErrPartitionLimit).
func (c *Client) SetPartitionLimit(n int64) { c.partitionLimit.Store(n) }

// CreatePartitions grows a topic to total partitions.
func (c *Client) CreatePartitions(ctx context.Context, name string, total int32) (Topic, error) {
	r, err := c.write(ctx, command{Op: opCreatePartitions, Name: name, Total: total, MaxPartitions: c.partitionLimit.Load()})
	if err != nil {
		return Topic{}, err
	}
	return cloneTopic(*r.Topic), nil
}

// AlterTopicConfigs sets the keys in set and removes those in del.
func (c *Client) AlterTopicConfigs(ctx context.Context, name string, set map[string]string, del []string) error {
	_, err := c.write(ctx, command{Op: opAlterTopicConfigs, Name: name, Set: set, Del: del})
	return err
}

// BrokerConfigs returns the dynamic configs of a broker (-1: cluster-wide).
func (c *Client) BrokerConfigs(broker int32) map[string]string { return c.v.BrokerConfigs(broker) }

// GroupConfigs returns a group's dynamic configs (Kafka's GROUP config
// resource), from the local cache.
func (c *Client) GroupConfigs(group string) map[string]string { return c.v.GroupConfigs(group) }

// GroupConfig returns one dynamic config of a group, from the local cache.
func (c *Client) GroupConfig(group, key string) (string, bool) { return c.v.GroupConfig(group, key) }

// AlterGroupConfigs sets and removes dynamic group configs.
func (c *Client) AlterGroupConfigs(ctx context.Context, group string, set map[string]string, del []string) error {
	_, err := c.write(ctx, command{Op: opAlterGroupConfigs, Group: group, Set: set, Del: del})
	return err
}

// AlterBrokerConfigs sets and removes dynamic broker configs.
func (c *Client) AlterBrokerConfigs(ctx context.Context, broker int32, set map[string]string, del []string) error {
	_, err := c.write(ctx, command{Op: opAlterBrokerConfig, BrokerID: broker, Set: set, Del: del})
	return err
}

// AllocateProducerIDs reserves count consecutive producer ids and returns
// the first.
func (c *Client) AllocateProducerIDs(ctx context.Context, count int64) (int64, error) {
	r, err := c.write(ctx, command{Op: opAllocProducerIDs, Count: count})
	return r.Int, err
}

// ---- beyond server.Catalog ----

// SetPartitionLeader records a partition's leader and epoch (the replica
// layer reports raft leadership here) and, when isr is not nil, the
// replicas that leader counts in sync (as Kafka's AlterPartition does); an
// epoch lower than the stored one is rejected.
func (c *Client) SetPartitionLeader(ctx context.Context, topic string, partition, leader, epoch int32, isr []int32) error {
	_, err := c.write(ctx, command{Op: opSetLeader, Name: topic, Partition: partition, Leader: leader, Epoch: epoch, ISR: isr})
	return err
}

// LeaderChange is one partition's leader, epoch and (when ISR is not
// nil) in-sync replicas, for SetPartitionLeaders.
type LeaderChange struct {
	Partition int32   `json:"p"`
	Leader    int32   `json:"l"`
	Epoch     int32   `json:"e"`
	ISR       []int32 `json:"isr,omitempty"`
}

// SetPartitionLeaders is SetPartitionLeader for many partitions of one
// topic in one metastore write. A change whose epoch is below the stored
// one is skipped (the others apply); a partition out of range fails the
// whole write with ErrInvalidPartitions.
func (c *Client) SetPartitionLeaders(ctx context.Context, topic string, changes []LeaderChange) error {
	if len(changes) == 0 {
		return nil
	}
	_, err := c.write(ctx, command{Op: opSetLeaders, Name: topic, Leaders: changes})
	return err
}

// RegisterBroker registers (or re-registers) a broker and returns its new
// incarnation. The lease starts now; renew it with Heartbeat.
func (c *Client) RegisterBroker(ctx context.Context, b Broker) (uint64, error) {
	r, err := c.write(ctx, command{Op: opRegisterBroker, Broker: &b, NowMs: now()})
	return r.Inc, err
}

// Heartbeat renews a broker's lease. ErrFenced when the broker is not
// registered with that incarnation (its lease lapsed, or it registered
// again): the broker must stop acting on its old registration and register
// again.
func (c *Client) Heartbeat(ctx context.Context, brokerID int32, incarnation uint64) error {
	_, err := c.call(ctx, &Request{Kind: reqHeartbeat, BrokerID: brokerID, Inc: incarnation})
	return err
}

// ShutdownBroker marks a broker as in its controlled shutdown
// (Broker.ShuttingDown) until it unregisters; ErrFenced unless it is
// registered with incarnation.
func (c *Client) ShutdownBroker(ctx context.Context, brokerID int32, incarnation uint64) error {
	_, err := c.write(ctx, command{Op: opShutdownBroker, BrokerID: brokerID, Inc: incarnation})
	return err
}

// UnregisterBroker removes a broker at controlled shutdown.
func (c *Client) UnregisterBroker(ctx context.Context, brokerID int32, incarnation uint64) error {
	_, err := c.write(ctx, command{Op: opUnregisterBroker, BrokerID: brokerID, Inc: incarnation})
	return err
}

// Brokers lists the registered (live) brokers from the cache, by id.
func (c *Client) Brokers() []Broker { return c.v.Brokers() }

// Changed returns a channel closed the next time the cached topics,
// brokers, broker configs or cluster id change. Call it again after each
// wake-up; read the new state with Topics, Brokers, ... (a change may be
// coalesced with later ones).
func (c *Client) Changed() <-chan struct{} { return c.v.changedCh() }

// Revision is the metastore revision (raft applied index) the cache is at.
func (c *Client) Revision() uint64 { return c.v.revision() }

// WaitRevision blocks until the cache reached rev.
func (c *Client) WaitRevision(ctx context.Context, rev uint64) error { return c.v.waitRev(ctx, rev) }

// Fence identifies a group coordinator's claim on a group: its broker id
// and the incarnation of that broker's lease. A group write that carries
// one (CommitOffsets, SaveGroup, DeleteOffsets, DeleteGroup) is refused with
// ErrFenced unless the broker owns the group under that incarnation and is
// still registered with it, so a coordinator whose lease lapsed (a long
// pause, a partition) can change nothing once another broker could have
// taken the group over. The zero Fence writes unfenced (tools, tests).
type Fence struct {
	Broker      int32
	Incarnation uint64
	// OnBehalf marks a write this process makes for another broker (a
	// group claimed for the broker placement picked): it carries no
	// write sequence, since this process's numbers are not that
	// broker's, and one of them would order that broker's own writes.
	OnBehalf bool
}

// CommitOffsets stores offsets for a group. A zero CommitTime is set to now.
func (c *Client) CommitOffsets(ctx context.Context, f Fence, group string, offsets []OffsetCommit) error {
	if len(offsets) == 0 {
		return nil
	}
	t := time.Now()
	offs := make([]OffsetCommit, len(offsets))
	copy(offs, offsets)
	for i := range offs {
		if offs[i].CommitTime.IsZero() {
			offs[i].CommitTime = t
		}
	}
	_, err := c.write(ctx, fencedWrite(command{Op: opCommitOffsets, Group: group, Offsets: offs}, f))
	return err
}

// commitSeq numbers this process's fenced group writes (offset commits,
// transactional offset commits, offset deletes, group saves and deletes,
// group claims), in the order they are sent. A coordinator sends a group's
// offset writes one at a time, and its group saves one at a time, each
// after the previous one answered or timed out, but one that timed out may
// still be applied later: it waited, unread, in the buffers of a meta node
// that was stopped or stalled, which then runs it with the deadline it
// carried, counted from when it reads it; or the node proposed it and raft
// forwarded it late. Applied after a later write of the same group, it
// would take the group's offsets or state back; the metastore refuses it
// instead (ErrOvertaken; apply.go's checkWriteOrder). A number is compared
// only with those of the same coordinator (broker and incarnation: one
// process), so a process-wide counter orders them.
var commitSeq atomic.Uint64

// fencedWrite sets cmd's fence (group writes) and, for a fenced one, the
// next write sequence.
func fencedWrite(cmd command, f Fence) command {
	cmd.BrokerID, cmd.Inc = f.Broker, f.Incarnation
	if f.Incarnation != 0 && !f.OnBehalf {
		cmd.WriteSeq = commitSeq.Add(1)
	}
	return cmd
}

// FetchOffsets reads a group's committed offsets linearizably; tps nil means
// all of the group's. Partitions with no commit are left out.
func (c *Client) FetchOffsets(ctx context.Context, group string, tps []TopicPartition) ([]OffsetCommit, error) {
	if tps != nil && len(tps) == 0 {
		return nil, nil
	}
	resp, err := c.read(ctx, &readRequest{What: "offsets", Group: group, TPs: tps})
	if err != nil {
		return nil, err
	}
	return resp.Offsets, nil
}

// OffsetsSince reads, linearizably, every group's commits stored after
// revision since (0: all), in revision order, at most about max of them
// (0: no bound; the answer ends at a revision boundary), and the
// metastore's revision at the time of the read. Commits stored before
// revisions were recorded carry revision 0 and only come with since 0.
func (c *Client) OffsetsSince(ctx context.Context, since uint64, max int) ([]GroupOffsetCommit, uint64, error) {
	resp, err := c.read(ctx, &readRequest{What: "offsets_since", Since: since, Max: max})
	if err != nil {
		return nil, 0, err
	}
	return resp.GroupOffsets, resp.Rev, nil
}

// DeleteOffsets deletes a group's offsets for tps.
func (c *Client) DeleteOffsets(ctx context.Context, f Fence, group string, tps []TopicPartition) error {
	_, err := c.write(ctx, fencedWrite(command{Op: opDeleteOffsets, Group: group, TPs: tps}, f))
	return err
}

// SaveGroup stores a group's metadata, an opaque blob the coordinator owns.
func (c *Client) SaveGroup(ctx context.Context, f Fence, group string, state []byte) error {
	_, err := c.write(ctx, fencedWrite(command{Op: opSaveGroup, Group: group, State: state}, f))
	return err
}

// LoadGroup reads a group's metadata linearizably; ErrUnknownGroup if none
// was saved.
func (c *Client) LoadGroup(ctx context.Context, group string) ([]byte, error) {
	resp, err := c.read(ctx, &readRequest{What: "group", Group: group})
	if err != nil {
		return nil, err
	}
	if !resp.Found {
		return nil, ErrUnknownGroup
	}
	return resp.State, nil
}

// ShareState is one share-partition's state (KIP-932), an opaque blob the
// coordinator owns, stored per group, topic and partition.
type ShareState struct {
	Topic     TopicID `json:"t"`
	Partition int32   `json:"p"`
	State     []byte  `json:"s"`
}

// SaveShareState stores the state of a share group's partition.
func (c *Client) SaveShareState(ctx context.Context, f Fence, group string, topic TopicID, partition int32, state []byte) error {
	_, err := c.write(ctx, command{Op: opSaveShareState, Group: group, TopicID: &topic, Partition: partition,
		State: state, BrokerID: f.Broker, Inc: f.Incarnation})
	return err
}

// SaveClaimedShareState stores the state of a share group's partition
// under the share-partition's claim (ClaimSharePartition): ErrFenced
// unless f holds it.
func (c *Client) SaveClaimedShareState(ctx context.Context, f Fence, group string, topic TopicID, partition int32, state []byte) error {
	_, err := c.write(ctx, command{Op: opSaveShareState, Group: group, TopicID: &topic, Partition: partition,
		State: state, BrokerID: f.Broker, Inc: f.Incarnation, ShareClaim: true})
	return err
}

// ClaimSharePartition makes f.Broker the holder of a share group's
// partition state unless a live broker already holds it, and returns the
// holder either way (errors as ClaimGroup). A state write of the group's
// coordinator (SaveShareState) or DeleteGroup ends the claim.
func (c *Client) ClaimSharePartition(ctx context.Context, group string, topic TopicID, partition int32, f Fence) (int32, error) {
	r, err := c.write(ctx, command{Op: opClaimShare, Group: group, TopicID: &topic, Partition: partition, BrokerID: f.Broker, Inc: f.Incarnation})
	return r.Owner, err
}

// ReleaseSharePartition ends f.Broker's claim of a share group's
// partition, if it holds it.
func (c *Client) ReleaseSharePartition(ctx context.Context, group string, topic TopicID, partition int32, f Fence) error {
	_, err := c.write(ctx, command{Op: opReleaseShare, Group: group, TopicID: &topic, Partition: partition, BrokerID: f.Broker, Inc: f.Incarnation})
	return err
}

// SharePartitionHolder reads, linearizably, who holds a share group's
// partition (ClaimSharePartition): ok false when no claim is stored. The
// holder's lease may have lapsed since.
func (c *Client) SharePartitionHolder(ctx context.Context, group string, topic TopicID, partition int32) (f Fence, ok bool, err error) {
	resp, err := c.read(ctx, &readRequest{What: "share_owner", Group: group, TopicID: &topic, Partition: partition})
	if err != nil || !resp.Found {
		return Fence{}, false, err
	}
	f.Broker, f.Incarnation, ok = decodeOwner(resp.State)
	return f, ok, nil
}

// LoadShareStates reads every saved share-partition state of a group,
// linearizably.
func (c *Client) LoadShareStates(ctx context.Context, group string) ([]ShareState, error) {
	resp, err := c.read(ctx, &readRequest{What: "share_states", Group: group})
	if err != nil {
		return nil, err
	}
	return resp.ShareStates, nil
}

// DeleteGroup deletes a group's metadata, its offsets, its share-partition
// states and its owner.
func (c *Client) DeleteGroup(ctx context.Context, f Fence, group string) error {
	_, err := c.write(ctx, fencedWrite(command{Op: opDeleteGroup, Group: group}, f))
	return err
}

// ListGroups lists groups that have metadata or offsets.
func (c *Client) ListGroups(ctx context.Context) ([]string, error) {
	resp, err := c.read(ctx, &readRequest{What: "groups"})
	if err != nil {
		return nil, err
	}
	return resp.Groups, nil
}

// ClaimGroup makes f.Broker the group's coordinator unless a live broker
// already owns it (registered with the incarnation it claimed under); it
// returns the owner either way. ErrUnknownBroker if f.Broker is not
// registered, ErrFenced if not with f.Incarnation (a zero incarnation
// claims for whatever incarnation the broker has).
func (c *Client) ClaimGroup(ctx context.Context, group string, f Fence) (int32, error) {
	r, err := c.write(ctx, fencedWrite(command{Op: opClaimGroup, Group: group}, f))
	return r.Owner, err
}

// GetTopic reads a topic linearizably from the quorum (not the cache).
func (c *Client) GetTopic(ctx context.Context, name string) (Topic, bool, error) {
	resp, err := c.read(ctx, &readRequest{What: "topic", Name: name})
	if err != nil || !resp.Found {
		return Topic{}, false, err
	}
	return *resp.Topic, true, nil
}

// Sync waits until the cache holds every write committed before the call.
func (c *Client) Sync(ctx context.Context) error {
	resp, err := c.read(ctx, &readRequest{What: "barrier"})
	if err != nil {
		return err
	}
	for c.pull != nil && c.v.revision() < resp.Rev {
		if err := c.pull(ctx); err != nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return c.v.waitRev(ctx, resp.Rev)
}

// AddVoter adds metastore node id (internal listener addr) as a voter; see
// Node.AddVoter. Usable from any broker (forwarded to the raft leader).
func (c *Client) AddVoter(ctx context.Context, id uint64, addr string) error {
	_, err := c.call(ctx, &Request{Kind: reqAddVoter, NodeID: id, Addr: addr})
	return err
}

// RemoveVoter removes metastore node id from the group; see
// Node.RemoveVoter.
func (c *Client) RemoveVoter(ctx context.Context, id uint64) error {
	_, err := c.call(ctx, &Request{Kind: reqRemoveVoter, NodeID: id})
	return err
}

// NodeStatus returns the status of the metastore node this client talks to.
func (c *Client) NodeStatus(ctx context.Context) (Status, error) {
	resp, err := c.call(ctx, &Request{Kind: reqStatus})
	if err != nil {
		return Status{}, err
	}
	if resp.Status == nil {
		return Status{}, ErrInvalidRequest
	}
	return *resp.Status, nil
}

// PreferredGroupOwner is a stable choice of coordinator for group among
// the registered read and combined brokers (FNV-1a hash of the name over
// their sorted ids), or -1 if there are none. Pass it to ClaimGroup, which
// keeps an existing live owner.
func (c *Client) PreferredGroupOwner(group string) int32 {
	var ids []int32
	for _, b := range c.v.Brokers() {
		if b.Role == RoleRead || b.Role == RoleCombined {
			ids = append(ids, b.ID)
		}
	}
	if len(ids) == 0 {
		return -1
	}
	h := uint32(2166136261)
	for i := 0; i < len(group); i++ {
		h ^= uint32(group[i])
		h *= 16777619
	}
	return ids[h%uint32(len(ids))]
}
