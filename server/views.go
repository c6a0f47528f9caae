package server

import (
	"hash/fnv"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// brokerView is what one listener shows a client (docs/architecture.md,
// "Routing"):
//
//	view   brokers listed     a partition's leader
//	write  write brokers      its raft leader
//	read   read brokers       one of its read replicas, spread over them
//	mixed  every broker       its raft leader; read replicas listed as
//	                          replicas, for KIP-392 preferred read replicas
//
// A broker is listed with its endpoint of the same view, the way Kafka
// answers with the endpoints of the listener a request arrived on; a
// broker without such an endpoint is not listed. A combined broker (`sluice
// dev`) is both a writer and a reader.
type brokerView struct {
	name       string
	brokers    []kmsg.MetadataResponseBroker
	listed     map[int32]bool
	writers    map[int32]bool
	readers    map[int32]bool
	controller int32
}

func (s *Server) viewOf(rc *reqCtx) brokerView {
	l := rc.conn.listener
	v := brokerView{
		name:    l.cfg.View,
		listed:  make(map[int32]bool),
		writers: make(map[int32]bool),
		readers: make(map[int32]bool),
	}
	for _, b := range s.catalog.Brokers() {
		switch b.Role {
		case metastore.RoleWrite:
			v.writers[b.ID] = true
		case metastore.RoleRead:
			v.readers[b.ID] = true
		default:
			v.writers[b.ID], v.readers[b.ID] = true, true
		}
		if b.ID == s.cfg.NodeID {
			continue // listed below with the listener this request used
		}
		if !v.wants(b.ID) {
			continue
		}
		if ep, ok := viewEndpoint(b, l.cfg.Name, l.cfg.View); ok {
			mb := kmsg.NewMetadataResponseBroker()
			mb.NodeID, mb.Host, mb.Port = b.ID, ep.Host, ep.Port
			if b.Rack != "" {
				mb.Rack = kmsg.StringPtr(b.Rack)
			}
			v.brokers = append(v.brokers, mb)
			v.listed[b.ID] = true
		}
	}
	if _, known := v.writers[s.cfg.NodeID]; !known {
		// Not registered yet (start-up): this broker is what it runs.
		v.writers[s.cfg.NodeID] = s.cfg.HasRole("write")
		v.readers[s.cfg.NodeID] = s.cfg.HasRole("read")
	}
	self := kmsg.NewMetadataResponseBroker()
	self.NodeID, self.Host, self.Port = s.cfg.NodeID, l.host, l.port
	if s.cfg.Rack != "" {
		self.Rack = kmsg.StringPtr(s.cfg.Rack)
	}
	v.brokers = append(v.brokers, self)
	v.listed[s.cfg.NodeID] = true
	sort.Slice(v.brokers, func(i, j int) bool { return v.brokers[i].NodeID < v.brokers[j].NodeID })
	// The controller is whichever listed broker forwards admin requests
	// to the metastore, which is every broker: name the lowest id.
	v.controller = v.brokers[0].NodeID
	return v
}

// viewEndpoint is the endpoint of b that a Metadata answer on listener
// name (of view view) names: b's listener of the same name and view, as
// Kafka answers with the listener the request came in on, else b's first
// listener of that view. Brokers that dial each other on their
// inter-broker listener are thereby sent on through the same listener,
// with the same security protocol.
func viewEndpoint(b metastore.Broker, name, view string) (metastore.Endpoint, bool) {
	first, found := metastore.Endpoint{}, false
	for _, ep := range b.Endpoints {
		if ep.View != view {
			continue
		}
		if strings.EqualFold(ep.Name, name) {
			return ep, true
		}
		if !found {
			first, found = ep, true
		}
	}
	return first, found
}

// wants reports whether broker id belongs in this view.
func (v *brokerView) wants(id int32) bool {
	switch v.name {
	case "write":
		return v.writers[id]
	case "read":
		return v.readers[id]
	}
	return true
}

// partitionRoute returns the leader a client of this view should use for
// p, the leader epoch, and the replica, in-sync and offline lists to
// report. Replicas are the brokers of this view (a broker registered
// without an endpoint of the view is left out) and the assigned brokers
// that are down (not registered: their lease lapsed), which are offline
// and out of the ISR, as Kafka shows a fenced broker's replicas. The ISR
// is what the partition's raft leader last reported (p.InSync): voters
// and learners caught up within replica.lag.time.max.ms, so a healthy
// partition is fully replicated in every view (docs/architecture.md,
// "Replicas and ISR").
//
// A shared partition (shared is true: replication.mode=shared) is served
// by every read broker from the shared storage, whatever learners the
// metastore placed (docs/shared-storage.md): the read view spreads its
// partitions over all the read brokers it lists, and names them as its
// replicas, all in sync.
func (v brokerView) partitionRoute(topic string, p metastore.Partition, shared bool) (leader, epoch int32, replicas, isr, offline []int32) {
	epoch = p.LeaderEpoch
	leader = p.Leader
	if leader < 0 && len(p.Voters) > 0 {
		leader = p.Voters[0]
	}
	switch v.name {
	case "read":
		if shared {
			readers := v.listedReaders()
			leader = -1
			if len(readers) > 0 {
				leader = readers[spread(topic, p.ID, len(readers))]
			}
			return leader, epoch, readers, slices.Clone(readers), []int32{}
		}
		// Read brokers only: the partition's learners, plus any
		// combined voter (which is a reader too).
		var readers []int32
		for _, id := range p.Voters {
			if v.readers[id] && v.listed[id] {
				readers = append(readers, id)
			}
		}
		readers = append(readers, v.keepListed(p.Learners)...)
		leader = -1
		if len(readers) > 0 {
			leader = readers[spread(topic, p.ID, len(readers))]
		}
		replicas = append(readers, v.keepDown(p.Learners)...)
	case "write":
		if !v.listed[leader] {
			leader = -1
		}
		replicas = v.keepShown(p.Voters)
	default:
		if !v.listed[leader] {
			leader = -1
		}
		replicas = append(v.keepShown(p.Voters), v.keepShown(p.Learners)...)
	}
	inSync := p.InSync()
	isr, offline = []int32{}, []int32{}
	for _, id := range replicas {
		switch {
		case !v.up(id):
			offline = append(offline, id)
		case slices.Contains(inSync, id):
			isr = append(isr, id)
		}
	}
	return leader, epoch, replicas, isr, offline
}

// up reports whether broker id is registered (its lease is live); this
// broker counts as registered.
func (v brokerView) up(id int32) bool {
	_, w := v.writers[id]
	_, r := v.readers[id]
	return w || r
}

// listedReaders returns the read brokers (combined ones included) this
// view lists, in id order.
func (v brokerView) listedReaders() []int32 {
	var out []int32
	for id, r := range v.readers {
		if r && v.listed[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func (v brokerView) keepListed(ids []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if v.listed[id] {
			out = append(out, id)
		}
	}
	return out
}

// keepDown keeps the ids of brokers that are not registered.
func (v brokerView) keepDown(ids []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if !v.up(id) {
			out = append(out, id)
		}
	}
	return out
}

// keepShown keeps the replicas this view shows: listed brokers and brokers
// that are down (offline replicas).
func (v brokerView) keepShown(ids []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if v.listed[id] || !v.up(id) {
			out = append(out, id)
		}
	}
	return out
}

// spread picks a stable index for a partition, so the partitions of a
// topic spread evenly over n replicas and every client agrees.
func spread(topic string, partition int32, n int) int {
	h := fnv.New32a()
	h.Write([]byte(topic))
	return int((h.Sum32() + uint32(partition)) % uint32(n))
}

// preferredReadReplica picks the read broker a mixed-view consumer should
// fetch p from (KIP-392): a learner listed in this view, in the client's
// rack when it sent one and such a learner exists, otherwise a stable
// spread over the learners. Only learners in the ISR are offered: a read
// broker that lags would serve stale data, so its consumers fetch from the
// leader meanwhile. A shared partition (shared) is offered on any read
// broker the view lists: each serves it from the shared storage. -1 when
// p has none.
func (v brokerView) preferredReadReplica(topic string, p metastore.Partition, shared bool, clientRack string, racks map[int32]string) int32 {
	var candidates []int32
	if shared {
		candidates = v.listedReaders()
	} else {
		inSync := p.InSync()
		candidates = slices.DeleteFunc(v.keepListed(p.Learners), func(id int32) bool { return !slices.Contains(inSync, id) })
	}
	if len(candidates) == 0 {
		return -1
	}
	if clientRack != "" {
		var local []int32
		for _, id := range candidates {
			if racks[id] == clientRack {
				local = append(local, id)
			}
		}
		if len(local) > 0 {
			candidates = local
		}
	}
	return candidates[spread(topic, p.ID, len(candidates))]
}
