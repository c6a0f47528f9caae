package metastore

import (
	"context"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-broker/sluice/acl"
)

// view is the in-memory, cache-visible part of the state: cluster id,
// topics, brokers and dynamic broker configs, at revision rev (a raft index).
// A node keeps one, updated right after each apply transaction commits; a
// remote client keeps one, updated by its watch. Readers get copies.
type view struct {
	mu            sync.RWMutex
	rev           uint64
	clusterID     string
	leaseMs       int64
	topics        map[TopicID]*Topic
	names         map[string]TopicID
	brokers       map[int32]Broker
	brokerConfigs map[int32]map[string]string
	groupConfigs  map[string]map[string]string
	// quotas and their generation, loaded without mu (quotas.go).
	quotas atomic.Pointer[quotaSet]
	acls   map[string]acl.Binding // by acl.Binding.Key
	// aclGen moves whenever acls change (read without the lock by
	// the authorizer on every decision).
	aclGen atomic.Uint64
	// decommissioned: broker ids decommissioned (decommission.go), sorted.
	decommissioned []int32
	changed        chan struct{} // closed and replaced when rev advances
	contentCh      chan struct{} // closed and replaced when the content changes

	// scram: user -> mechanism -> credential (scram.go).
	scram map[string]map[string]ScramCredential
	// superUsers: the stored super users, sorted (superusers.go); a
	// change moves aclGen too.
	superUsers []string
}

func newView() *view {
	v := &view{changed: make(chan struct{}), contentCh: make(chan struct{})}
	v.resetLocked()
	return v
}

func (v *view) resetLocked() {
	v.topics = map[TopicID]*Topic{}
	v.names = map[string]TopicID{}
	v.brokers = map[int32]Broker{}
	v.brokerConfigs = map[int32]map[string]string{}
	v.groupConfigs = map[string]map[string]string{}
	v.scram = map[string]map[string]ScramCredential{}
	v.storeQuotasLocked(nil)
	v.acls = map[string]acl.Binding{}
	v.superUsers = nil
	v.aclGen.Add(1)
	v.decommissioned = nil
}

// event is one change of cache-visible state, produced by apply.
type event struct {
	Rev       uint64            `json:"rev"`
	Kind      string            `json:"kind"` // "topic", "broker", "bconf", "cluster", "quota", "acl", "decom"
	ID        TopicID           `json:"id,omitempty"`
	BrokerID  int32             `json:"bid,omitempty"`
	Topic     *Topic            `json:"topic,omitempty"`
	Broker    *Broker           `json:"broker,omitempty"`
	Configs   map[string]string `json:"configs,omitempty"`
	ClusterID string            `json:"cid,omitempty"`
	LeaseMs   int64             `json:"lease_ms,omitempty"` // kind "lease"
	Deleted   bool              `json:"del,omitempty"`
	Scram     *ScramCredential  `json:"scram,omitempty"` // kind "scram"
	Quota     *ClientQuota      `json:"quota,omitempty"`
	ACL       *acl.Binding      `json:"acl,omitempty"`
	// Decommissioned is the whole set after a "decom" event.
	Decommissioned []int32 `json:"decom,omitempty"`
	// Group names the group of a "gconf" event.
	Group string `json:"g,omitempty"`
	// SuperUsers is the whole stored set after a "super" event.
	SuperUsers []string `json:"super,omitempty"`
}

// histMaxWeight bounds the memory of a node's watch history besides its
// event count (Config.WatchHistory): a topic event holds a copy of the
// whole topic, so a topic of 1,000 partitions whose leaders change one
// write at a time would otherwise keep 10,000 copies of 1,000 partitions.
// The oldest events go first; a watcher behind them gets a full image, as
// one behind WatchHistory events does. About 250 bytes a partition: a
// history of at most some 12 MB.
const histMaxWeight = 50_000

// weight is what an event counts against histMaxWeight: 1, plus the
// partitions of the topic it carries.
func (e *event) weight() int {
	if e.Topic != nil {
		return 1 + len(e.Topic.Partitions)
	}
	return 1
}

// image is a full copy of a view; watchers behind the event history get one.
type image struct {
	Rev           uint64                      `json:"rev"`
	ClusterID     string                      `json:"cid"`
	LeaseMs       int64                       `json:"lease_ms,omitempty"`
	Topics        []Topic                     `json:"topics"`
	Brokers       []Broker                    `json:"brokers"`
	BrokerConfigs map[int32]map[string]string `json:"bconfs"`
	Scram         []ScramCredential           `json:"scram,omitempty"`
	Quotas        []ClientQuota               `json:"quotas,omitempty"`
	ACLs          []acl.Binding               `json:"acls,omitempty"`
	// Decommissioned: absent from images of nodes that predate it.
	Decommissioned []int32 `json:"decom,omitempty"`
	// GroupConfigs: absent from images of nodes that predate it.
	GroupConfigs map[string]map[string]string `json:"gconfs,omitempty"`
	// SuperUsers: the stored super users (superusers.go); absent from
	// images of nodes that predate them.
	SuperUsers []string `json:"super,omitempty"`
}

func (v *view) apply(evs []event, rev uint64) {
	v.mu.Lock()
	changed := false
	for i := range evs {
		// Events at or below rev are already reflected (two watch
		// answers may overlap); applying them again could revert a newer
		// state.
		if evs[i].Rev > v.rev {
			v.applyEventLocked(&evs[i])
			changed = true
		}
	}
	v.advanceLocked(rev)
	if changed {
		v.contentChangedLocked()
	}
	v.mu.Unlock()
}

func (v *view) contentChangedLocked() {
	close(v.contentCh)
	v.contentCh = make(chan struct{})
}

// changedCh is closed the next time the content changes.
func (v *view) changedCh() <-chan struct{} {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.contentCh
}

func (v *view) advanceLocked(rev uint64) {
	if rev > v.rev {
		v.rev = rev
		close(v.changed)
		v.changed = make(chan struct{})
	}
}

func (v *view) applyEventLocked(e *event) {
	switch e.Kind {
	case "topic":
		if old, ok := v.topics[e.ID]; ok {
			delete(v.names, old.Name)
			delete(v.topics, e.ID)
		}
		if !e.Deleted && e.Topic != nil {
			t := cloneTopic(*e.Topic)
			v.topics[e.ID] = &t
			v.names[t.Name] = e.ID
		}
	case "broker":
		if e.Deleted {
			delete(v.brokers, e.BrokerID)
		} else if e.Broker != nil {
			v.brokers[e.BrokerID] = cloneBroker(*e.Broker)
		}
	case "bconf":
		if len(e.Configs) == 0 {
			delete(v.brokerConfigs, e.BrokerID)
		} else {
			v.brokerConfigs[e.BrokerID] = maps.Clone(e.Configs)
		}
	case "cluster":
		v.clusterID = e.ClusterID
	case "lease":
		v.leaseMs = e.LeaseMs
	case "scram":
		v.applyScramLocked(e)
	case "quota":
		if e.Quota != nil {
			v.setQuotaLocked(*e.Quota)
		}
	case "acl":
		if e.ACL != nil {
			if e.Deleted {
				delete(v.acls, e.ACL.Key())
			} else {
				v.acls[e.ACL.Key()] = *e.ACL
			}
			v.aclGen.Add(1)
		}
	case "decom":
		v.decommissioned = slices.Clone(e.Decommissioned)
	case "super":
		v.superUsers = slices.Clone(e.SuperUsers)
		v.aclGen.Add(1)
	case "gconf":
		if len(e.Configs) == 0 {
			delete(v.groupConfigs, e.Group)
		} else {
			v.groupConfigs[e.Group] = maps.Clone(e.Configs)
		}
	}
}

func (v *view) loadImage(img *image) {
	v.mu.Lock()
	if img.Rev < v.rev {
		// Older than what we hold (a lagging node): keep ours.
		v.mu.Unlock()
		return
	}
	v.resetLocked()
	v.clusterID = img.ClusterID
	v.leaseMs = img.LeaseMs
	for _, t := range img.Topics {
		t := cloneTopic(t)
		v.topics[t.ID] = &t
		v.names[t.Name] = t.ID
	}
	for _, b := range img.Brokers {
		v.brokers[b.ID] = cloneBroker(b)
	}
	for id, c := range img.BrokerConfigs {
		v.brokerConfigs[id] = maps.Clone(c)
	}
	for g, c := range img.GroupConfigs {
		v.groupConfigs[g] = maps.Clone(c)
	}
	for i := range img.Scram {
		v.applyScramLocked(&event{Scram: &img.Scram[i]})
	}
	v.storeQuotasLocked(cloneQuotas(img.Quotas))
	for _, b := range img.ACLs {
		v.acls[b.Key()] = b
	}
	v.decommissioned = slices.Clone(img.Decommissioned)
	v.superUsers = slices.Clone(img.SuperUsers)
	v.advanceLocked(img.Rev)
	v.contentChangedLocked()
	v.mu.Unlock()
}

func (v *view) image() *image {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.imageLocked()
}

func (v *view) imageLocked() *image {
	img := &image{Rev: v.rev, ClusterID: v.clusterID, LeaseMs: v.leaseMs, BrokerConfigs: map[int32]map[string]string{}}
	for _, t := range v.topics {
		img.Topics = append(img.Topics, cloneTopic(*t))
	}
	for _, b := range v.brokers {
		img.Brokers = append(img.Brokers, cloneBroker(b))
	}
	for id, c := range v.brokerConfigs {
		img.BrokerConfigs[id] = maps.Clone(c)
	}
	for g, c := range v.groupConfigs {
		if img.GroupConfigs == nil {
			img.GroupConfigs = map[string]map[string]string{}
		}
		img.GroupConfigs[g] = maps.Clone(c)
	}
	for _, m := range v.scram {
		for _, c := range m {
			img.Scram = append(img.Scram, c)
		}
	}
	img.Quotas = cloneQuotas(v.quotas.Load().list)
	for _, b := range v.acls {
		img.ACLs = append(img.ACLs, b)
	}
	img.Decommissioned = slices.Clone(v.decommissioned)
	img.SuperUsers = slices.Clone(v.superUsers)
	return img
}

func (v *view) revision() uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.rev
}

// waitRev blocks until the view reached rev.
func (v *view) waitRev(ctx context.Context, rev uint64) error {
	for {
		v.mu.RLock()
		cur, ch := v.rev, v.changed
		v.mu.RUnlock()
		if cur >= rev {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// BrokerLease is the cluster's broker lease (broker_lease.go); 0 for a
// cluster that has not recorded one yet.
func (v *view) BrokerLease() time.Duration {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return time.Duration(v.leaseMs) * time.Millisecond
}

func (v *view) ClusterID() string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.clusterID
}

func (v *view) Topics() []Topic {
	v.mu.RLock()
	out := make([]Topic, 0, len(v.topics))
	for _, t := range v.topics {
		out = append(out, cloneTopic(*t))
	}
	v.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (v *view) TopicByName(name string) (Topic, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	id, ok := v.names[name]
	if !ok {
		return Topic{}, false
	}
	return cloneTopic(*v.topics[id]), true
}

func (v *view) TopicByID(id TopicID) (Topic, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	t, ok := v.topics[id]
	if !ok {
		return Topic{}, false
	}
	return cloneTopic(*t), true
}

// SharedTopicByName and SharedTopicByID are TopicByName and TopicByID
// without the deep copy, for hot paths (every Produce request looks its
// topics up, and a copy of a topic with many partitions is an allocation
// per partition). The topic returned is the view's own: the caller must
// not modify it or anything it references. It stays consistent, because
// the view never changes a topic it holds: a change replaces it.
func (v *view) SharedTopicByName(name string) (*Topic, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	id, ok := v.names[name]
	if !ok {
		return nil, false
	}
	t, ok := v.topics[id]
	return t, ok
}

func (v *view) SharedTopicByID(id TopicID) (*Topic, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	t, ok := v.topics[id]
	return t, ok
}

// SharedTopicByName looks a topic up in the cache without copying it; see
// view.SharedTopicByName for what the caller must not do.
func (c *Client) SharedTopicByName(name string) (*Topic, bool) { return c.v.SharedTopicByName(name) }

// SharedTopicByID is SharedTopicByName by id.
func (c *Client) SharedTopicByID(id TopicID) (*Topic, bool) { return c.v.SharedTopicByID(id) }

func (v *view) GroupConfigs(group string) map[string]string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return maps.Clone(v.groupConfigs[group])
}

// GroupConfig is one dynamic config of a group, from the cache.
func (v *view) GroupConfig(group, key string) (string, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	val, ok := v.groupConfigs[group][key]
	return val, ok
}

func (v *view) BrokerConfigs(broker int32) map[string]string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return maps.Clone(v.brokerConfigs[broker])
}

func (v *view) Brokers() []Broker {
	v.mu.RLock()
	out := make([]Broker, 0, len(v.brokers))
	for _, b := range v.brokers {
		out = append(out, cloneBroker(b))
	}
	v.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Decommissioned returns the decommissioned broker ids, sorted.
func (v *view) Decommissioned() []int32 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return slices.Clone(v.decommissioned)
}

func cloneTopic(t Topic) Topic {
	t.Configs = maps.Clone(t.Configs)
	ps := make([]Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		p.Voters = append([]int32(nil), p.Voters...)
		p.Learners = append([]int32(nil), p.Learners...)
		p.Target = append([]int32(nil), p.Target...)
		p.InitVoters = append([]int32(nil), p.InitVoters...)
		p.InitLearners = append([]int32(nil), p.InitLearners...)
		p.Departed = append([]int32(nil), p.Departed...)
		p.ISR = slices.Clone(p.ISR)
		if p.AsyncMaster != nil {
			p.AsyncMaster = new(*p.AsyncMaster)
		}
		if p.AsyncTakeover != nil {
			p.AsyncTakeover = new(*p.AsyncTakeover)
		}
		p.AsyncClaims = maps.Clone(p.AsyncClaims)
		if p.AsyncHandover != nil {
			p.AsyncHandover = new(*p.AsyncHandover)
		}
		ps[i] = p
	}
	t.Partitions = ps
	return t
}

func cloneBroker(b Broker) Broker {
	b.Endpoints = append([]Endpoint(nil), b.Endpoints...)
	return b
}
