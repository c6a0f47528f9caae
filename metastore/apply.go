package metastore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sluice-broker/sluice/acl"
)

// applier applies the commands of committed entries to the state buckets
// inside one bbolt write transaction (doc.go step 3). The caller writes
// meta/applied in the same transaction. Apply is deterministic: it reads only
// the transaction and the command, so every node reaches the same state.
// A command that fails leaves no trace in the state and returns its error in
// its result; only an inconsistency of the database itself is fatal (panic).
type applier struct {
	tx     *bolt.Tx
	index  uint64
	events []event
	// leaseMs is the lease a registration grants, for the informational
	// LeaseExpiry (expiry itself is decided by the leader, see lease.go).
	leaseMs int64
}

func (a *applier) apply(c *command) (r result) {
	defer func() {
		r.Rev = a.index
	}()
	fail := func(err error) result { return result{Err: errCode(err)} }
	switch c.Op {
	case opNoop:
		return result{}
	case opAlterScram:
		return a.applyAlterScram(c)
	case opInitCluster:
		m := a.tx.Bucket(bucketMeta)
		if cur := m.Get(keyClusterID); cur != nil {
			return result{Err: errCode(errClusterIDSet)}
		}
		a.put(m, keyClusterID, []byte(c.ClusterID))
		a.events = append(a.events, event{Rev: a.index, Kind: "cluster", ClusterID: c.ClusterID})
		if c.LeaseMs > 0 && m.Get(keyBrokerLease) == nil {
			a.put(m, keyBrokerLease, u64(uint64(c.LeaseMs)))
			a.events = append(a.events, event{Rev: a.index, Kind: "lease", LeaseMs: c.LeaseMs})
		}
		return result{Visible: true}
	case opSetBrokerLease:
		// Set once, for a cluster created before the lease was
		// replicated; never changed afterwards (broker_lease.go).
		m := a.tx.Bucket(bucketMeta)
		if c.LeaseMs <= 0 {
			return fail(ErrInvalidRequest)
		}
		if m.Get(keyBrokerLease) != nil {
			return result{}
		}
		a.put(m, keyBrokerLease, u64(uint64(c.LeaseMs)))
		a.events = append(a.events, event{Rev: a.index, Kind: "lease", LeaseMs: c.LeaseMs})
		return result{Visible: true}
	case opCreateTopic:
		t, err := a.createTopic(c)
		if err != nil {
			return fail(err)
		}
		return result{Topic: t, Visible: true}
	case opDeleteTopic:
		if c.TopicID == nil {
			return fail(ErrInvalidRequest)
		}
		t, ok := a.topicByID(*c.TopicID)
		if !ok {
			return fail(ErrUnknownTopic)
		}
		a.del(a.tx.Bucket(bucketTopics), t.ID[:])
		a.del(a.tx.Bucket(bucketTopicNames), []byte(t.Name))
		a.deleteSharedTopic(t.ID)
		a.events = append(a.events, event{Rev: a.index, Kind: "topic", ID: t.ID, Deleted: true})
		return result{Visible: true}
	case opCreatePartitions:
		t, ok := a.topicByName(c.Name)
		if !ok {
			return fail(ErrUnknownTopic)
		}
		have := int32(len(t.Partitions))
		if c.Total <= have {
			return fail(ErrInvalidPartitions)
		}
		if err := a.checkPartitionLimit(c.MaxPartitions, int64(c.Total-have)); err != nil {
			return fail(err)
		}
		rf := int16(1)
		if have > 0 {
			rf = int16(len(t.Partitions[0].Voters))
		}
		parts, err := placePartitions(a.placeable(), have, c.Total-have, rf, nil, t.ID, a.readReplicas(t.Configs))
		if err != nil {
			return fail(err)
		}
		t.Partitions = append(t.Partitions, parts...)
		a.putTopic(t)
		return result{Topic: t, Visible: true}
	case opAlterTopicConfigs:
		t, ok := a.topicByName(c.Name)
		if !ok {
			return fail(ErrUnknownTopic)
		}
		t.Configs = alterMap(t.Configs, c.Set, c.Del)
		if touches(c, ReadReplicasConfig) {
			a.balanceLearners(t, readBrokers(a.placeable()))
		}
		a.putTopic(t)
		return result{Visible: true}
	case opSetLeader:
		t, ok := a.topicByName(c.Name)
		if !ok {
			return fail(ErrUnknownTopic)
		}
		if c.Partition < 0 || int(c.Partition) >= len(t.Partitions) {
			return fail(ErrInvalidPartitions)
		}
		if err := setLeader(&t.Partitions[c.Partition], LeaderChange{Leader: c.Leader, Epoch: c.Epoch, ISR: c.ISR}); err != nil {
			return result{Err: errCode(err)}
		}
		a.putTopic(t)
		return result{Visible: true}
	case opSetLeaders:
		t, ok := a.topicByName(c.Name)
		if !ok {
			return fail(ErrUnknownTopic)
		}
		for _, l := range c.Leaders {
			if l.Partition < 0 || int(l.Partition) >= len(t.Partitions) {
				return fail(ErrInvalidPartitions)
			}
		}
		changed := false
		for _, l := range c.Leaders {
			// A stale change is skipped, not an error: a newer leader
			// published its partition meanwhile, and the others stand.
			if setLeader(&t.Partitions[l.Partition], l) == nil {
				changed = true
			}
		}
		if !changed {
			return result{}
		}
		a.putTopic(t)
		return result{Visible: true}
	case opAlterBrokerConfig:
		b := a.tx.Bucket(bucketBrokerConfigs)
		var cur map[string]string
		if v := b.Get(brokerKey(c.BrokerID)); v != nil {
			mustUnmarshal(v, &cur)
		}
		cur = alterMap(cur, c.Set, c.Del)
		if len(cur) == 0 {
			a.del(b, brokerKey(c.BrokerID))
		} else {
			a.put(b, brokerKey(c.BrokerID), mustJSON(cur))
		}
		a.events = append(a.events, event{Rev: a.index, Kind: "bconf", BrokerID: c.BrokerID, Configs: maps.Clone(cur)})
		if c.BrokerID == -1 && touches(c, ReadReplicasConfig) {
			a.rebalanceClusterDefault()
		}
		return result{Visible: true}
	case opAlterGroupConfigs:
		if c.Group == "" {
			return fail(ErrInvalidRequest)
		}
		b := a.tx.Bucket(bucketGroupConfigs)
		var cur map[string]string
		if v := b.Get([]byte(c.Group)); v != nil {
			mustUnmarshal(v, &cur)
		}
		cur = alterMap(cur, c.Set, c.Del)
		if len(cur) == 0 {
			a.del(b, []byte(c.Group))
		} else {
			a.put(b, []byte(c.Group), mustJSON(cur))
		}
		a.events = append(a.events, event{Rev: a.index, Kind: "gconf", Group: c.Group, Configs: maps.Clone(cur)})
		return result{Visible: true}
	case opClaimDirectory:
		return a.claimDirectory(c)
	case opAlterClientQuotas:
		return a.alterClientQuotas(c)
	case opAllocProducerIDs:
		if c.Count <= 0 {
			return fail(ErrInvalidRequest)
		}
		m := a.tx.Bucket(bucketMeta)
		next := int64(getU64(m.Get(keyProducerID)))
		a.put(m, keyProducerID, u64(uint64(next+c.Count)))
		return result{Int: next}
	case opRegisterBroker:
		if c.Broker == nil || c.Broker.ID < 0 {
			return fail(ErrInvalidRequest)
		}
		m := a.tx.Bucket(bucketMeta)
		inc := getU64(m.Get(keyIncarnation)) + 1
		a.put(m, keyIncarnation, u64(inc))
		br := cloneBroker(*c.Broker)
		br.Incarnation = inc
		br.LeaseExpiry = time.UnixMilli(c.NowMs + a.leaseMs).UTC()
		a.putBroker(br)
		a.dropAsyncClaims(br.ID)
		if !slices.Contains(a.decommissioned(), br.ID) {
			a.addLearner(br)
			a.placeVoterless(br)
		}
		return result{Inc: inc, Visible: true}
	case opShutdownBroker:
		b, ok := a.broker(c.BrokerID)
		if !ok || b.Incarnation != c.Inc {
			return fail(ErrFenced)
		}
		b.ShuttingDown = true
		a.putBroker(b)
		return result{Visible: true}
	case opExpireBroker, opUnregisterBroker:
		b, ok := a.broker(c.BrokerID)
		if !ok || b.Incarnation != c.Inc {
			// Fenced by incarnation: a stale expiry never removes a broker
			// that registered again.
			return fail(ErrFenced)
		}
		a.del(a.tx.Bucket(bucketBrokers), brokerKey(c.BrokerID))
		a.events = append(a.events, event{Rev: a.index, Kind: "broker", BrokerID: c.BrokerID, Deleted: true})
		return result{Visible: true}
	case opSetAsyncMaster:
		if err := a.setAsyncMaster(c); err != nil {
			return fail(err)
		}
		return result{Visible: true}
	case opAsyncClaim:
		if err := a.asyncClaim(c); err != nil {
			return fail(err)
		}
		return result{Visible: true}
	case opClaimSharedLeader:
		return a.claimSharedLeader(c)
	case opCommitSharedChunks:
		return a.commitSharedChunks(c)
	case opAdvanceSharedStart:
		return a.advanceSharedStart(c)
	case opCondemnSharedObjects:
		return a.condemnSharedObjects(c)
	case opReplaceSharedChunks:
		return a.replaceSharedChunks(c)
	case opAsyncPromote:
		if err := a.asyncPromote(c); err != nil {
			return fail(err)
		}
		return result{Visible: true}
	case opAsyncHandover:
		if err := a.asyncHandover(c); err != nil {
			return fail(err)
		}
		return result{Visible: true}
	case opAlterReassignment:
		if err := a.alterReassignment(c); err != nil {
			return fail(err)
		}
		return result{Visible: true}
	case opFinishReassignment:
		if err := a.finishReassignment(c); err != nil {
			return fail(err)
		}
		return result{Visible: true}
	case opRemoveLearner:
		if err := a.removeLearner(c.BrokerID); err != nil {
			return fail(err)
		}
		return result{Visible: true}
	case opAddSuperUser, opRemoveSuperUser:
		return a.applySuperUser(c)
	case opDecommissionBroker:
		if err := a.decommission(c.BrokerID); err != nil {
			return fail(err)
		}
		return result{Visible: true}
	case opRecommissionBroker:
		if err := a.recommission(c.BrokerID); err != nil {
			return fail(err)
		}
		return result{Visible: true}
	case opCommitOffsets:
		if c.Group == "" {
			return fail(ErrInvalidRequest)
		}
		if err := a.checkFence(c); err != nil {
			return fail(err)
		}
		if err := a.checkWriteOrder(c, streamOffsets); err != nil {
			return fail(err)
		}
		gb, err := a.tx.Bucket(bucketOffsets).CreateBucketIfNotExists([]byte(c.Group))
		if err != nil {
			panic(fmt.Sprintf("metastore: offsets bucket: %v", err))
		}
		for _, o := range c.Offsets {
			a.put(gb, offsetKey(o.Topic, o.Partition), encodeOffsetValue(offsetValue{
				Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata,
				CommitTime: o.CommitTime.UnixMilli(), Rev: a.index,
			}))
		}
		return result{}
	case opDeleteOffsets:
		if err := a.checkFence(c); err != nil {
			return fail(err)
		}
		if err := a.checkWriteOrder(c, streamOffsets); err != nil {
			return fail(err)
		}
		ob := a.tx.Bucket(bucketOffsets)
		gb := ob.Bucket([]byte(c.Group))
		if gb == nil {
			return result{}
		}
		for _, tp := range c.TPs {
			a.del(gb, offsetKey(tp.Topic, tp.Partition))
		}
		if k, _ := gb.Cursor().First(); k == nil {
			if err := ob.DeleteBucket([]byte(c.Group)); err != nil {
				panic(fmt.Sprintf("metastore: delete offsets bucket: %v", err))
			}
		}
		return result{}
	case opSaveGroup:
		if c.Group == "" {
			return fail(ErrInvalidRequest)
		}
		if err := a.checkFence(c); err != nil {
			return fail(err)
		}
		if err := a.checkWriteOrder(c, streamState); err != nil {
			return fail(err)
		}
		state := c.State
		if state == nil {
			state = []byte{}
		}
		a.put(a.tx.Bucket(bucketGroups), []byte(c.Group), state)
		return result{}
	case opSaveShareState:
		if c.Group == "" || c.TopicID == nil {
			return fail(ErrInvalidRequest)
		}
		if c.ShareClaim {
			if err := a.checkShareFence(c); err != nil {
				return fail(err)
			}
		} else {
			if err := a.checkFence(c); err != nil {
				return fail(err)
			}
			// A write by the group's coordinator (the share-group
			// offsets admin) ends the holder's claim: its copy of the
			// state is stale, its next write is fenced and the next
			// fetch claims the partition again and loads this state.
			a.del(a.tx.Bucket(bucketShareOwners), shareOwnerKey(c.Group, *c.TopicID, c.Partition))
		}
		gb, err := a.tx.Bucket(bucketShareState).CreateBucketIfNotExists([]byte(c.Group))
		if err != nil {
			panic(fmt.Sprintf("metastore: share state bucket: %v", err))
		}
		state := c.State
		if state == nil {
			state = []byte{}
		}
		a.put(gb, shareStateKey(*c.TopicID, c.Partition), state)
		return result{}
	case opDeleteGroup:
		if err := a.checkFence(c); err != nil {
			return fail(err)
		}
		// Sent after the group's offset writes and saves (the
		// coordinator holds both turns): below either, it is late.
		if err := a.checkWriteOrder(c, streamOffsets, streamState); err != nil {
			return fail(err)
		}
		a.del(a.tx.Bucket(bucketGroups), []byte(c.Group))
		a.del(a.tx.Bucket(bucketGroupOwners), []byte(c.Group))
		a.delShareOwners(c.Group)
		for _, name := range [][]byte{bucketOffsets, bucketShareState} {
			ob := a.tx.Bucket(name)
			if ob.Bucket([]byte(c.Group)) != nil {
				if err := ob.DeleteBucket([]byte(c.Group)); err != nil {
					panic(fmt.Sprintf("metastore: delete %s bucket: %v", name, err))
				}
			}
		}
		return result{}
	case opCreateACLs:
		return a.createACLs(c)
	case opDeleteACLs:
		return a.deleteACLs(c)
	case opPutTxn, opDeleteTxn, opTxnOffsets:
		return a.applyTxn(c)
	case opClaimGroup:
		if c.Group == "" {
			return fail(ErrInvalidRequest)
		}
		b, ok := a.broker(c.BrokerID)
		if !ok {
			return fail(ErrUnknownBroker)
		}
		if c.Inc != 0 && b.Incarnation != c.Inc {
			return fail(ErrFenced)
		}
		gob := a.tx.Bucket(bucketGroupOwners)
		if owner, inc, ok := a.groupOwner(c.Group); ok && a.liveOwner(owner, inc) {
			if owner != c.BrokerID || inc == c.Inc {
				return result{Owner: owner}
			}
		}
		// A numbered claim starts both write streams at its number: a
		// write of this coordinator sent before it (before the group was
		// deleted) is late.
		a.put(gob, []byte(c.Group), ownerRecord(c.BrokerID, c.Inc, [numStreams]uint64{c.WriteSeq, c.WriteSeq}))
		return result{Owner: c.BrokerID}
	case opClaimShare:
		if c.Group == "" || c.TopicID == nil {
			return fail(ErrInvalidRequest)
		}
		b, ok := a.broker(c.BrokerID)
		if !ok {
			return fail(ErrUnknownBroker)
		}
		if c.Inc != 0 && b.Incarnation != c.Inc {
			return fail(ErrFenced)
		}
		key := shareOwnerKey(c.Group, *c.TopicID, c.Partition)
		sob := a.tx.Bucket(bucketShareOwners)
		if owner, inc, ok := decodeOwner(sob.Get(key)); ok && a.liveOwner(owner, inc) {
			if owner != c.BrokerID || inc == c.Inc {
				return result{Owner: owner}
			}
		}
		a.put(sob, key, ownerValue(c.BrokerID, c.Inc))
		return result{Owner: c.BrokerID}
	case opReleaseShare:
		if c.Group == "" || c.TopicID == nil {
			return fail(ErrInvalidRequest)
		}
		key := shareOwnerKey(c.Group, *c.TopicID, c.Partition)
		sob := a.tx.Bucket(bucketShareOwners)
		if owner, inc, ok := decodeOwner(sob.Get(key)); ok && owner == c.BrokerID && (c.Inc == 0 || inc == c.Inc) {
			a.del(sob, key)
		}
		return result{}
	}
	return fail(fmt.Errorf("%w: unknown op %q", ErrInvalidRequest, c.Op))
}

func (a *applier) createTopic(c *command) (*Topic, error) {
	s := c.Spec
	if s == nil || c.TopicID == nil || s.Name == "" || len(s.Name) > 249 {
		return nil, ErrInvalidRequest
	}
	if _, ok := a.topicByName(s.Name); ok {
		return nil, ErrTopicExists
	}
	n := s.Partitions
	if len(s.Assignment) > 0 {
		if n > 0 && int(n) != len(s.Assignment) {
			return nil, ErrInvalidPartitions
		}
		n = int32(len(s.Assignment))
	}
	if n <= 0 {
		return nil, ErrInvalidPartitions
	}
	if err := a.checkPartitionLimit(c.MaxPartitions, int64(n)); err != nil {
		return nil, err
	}
	parts, err := placePartitions(a.placeable(), 0, n, s.ReplicationFactor, s.Assignment, *c.TopicID, a.readReplicas(s.Configs))
	if err != nil {
		return nil, err
	}
	t := &Topic{ID: *c.TopicID, Name: s.Name, Partitions: parts, Configs: maps.Clone(s.Configs)}
	if _, ok := a.topicByID(t.ID); ok {
		return nil, fmt.Errorf("%w: topic id collision", ErrInvalidRequest)
	}
	a.putTopic(t)
	return t, nil
}

// setLeader applies one leader change to p; an epoch below p's is stale
// and changes nothing.
func setLeader(p *Partition, l LeaderChange) error {
	if l.Epoch < p.LeaderEpoch {
		return fmt.Errorf("stale leader epoch %d < %d", l.Epoch, p.LeaderEpoch)
	}
	if l.Leader != p.Leader || l.Epoch != p.LeaderEpoch {
		p.ISR = nil // the new leader's, until it reports one
	}
	p.Leader, p.LeaderEpoch = l.Leader, l.Epoch
	if l.ISR != nil {
		p.ISR = slices.Clone(l.ISR)
	}
	return nil
}

// placePartitions assigns partitions [first, first+count) of topic. Voters
// are write (and combined) brokers, round-robin from a rotating start over
// a list that interleaves racks, so replicas of one partition land on
// distinct racks when there are enough; learners are readReplicas of the
// read and combined brokers that are not voters of that partition (all of
// them for -1; placement.go). With no write brokers registered the
// partitions get no voters and leader -1.
func placePartitions(brokers []Broker, first, count int32, rf int16, assignment [][]int32, topic TopicID, readReplicas int) ([]Partition, error) {
	var writers []Broker
	for _, b := range brokers {
		switch b.Role {
		case RoleWrite, RoleCombined, "":
			writers = append(writers, b)
		}
	}
	readers := readBrokers(brokers)
	writers = rackInterleave(writers)
	if len(assignment) == 0 {
		if rf <= 0 {
			rf = int16(min(len(writers), 3))
		}
		if len(writers) > 0 && int(rf) > len(writers) {
			return nil, ErrInvalidReplicationFactor
		}
	}
	out := make([]Partition, 0, count)
	for i := int32(0); i < count; i++ {
		p := Partition{ID: first + i, Leader: -1}
		switch {
		case len(assignment) > 0:
			p.Voters = append([]int32(nil), assignment[i]...)
			if len(p.Voters) == 0 {
				return nil, ErrInvalidReplicationFactor
			}
		case len(writers) > 0:
			for k := 0; k < int(rf); k++ {
				p.Voters = append(p.Voters, writers[(int(first+i)+k)%len(writers)].ID)
			}
		}
		if len(p.Voters) > 0 {
			p.Leader = p.Voters[0]
		}
		fillLearners(topic, &p, readers, readReplicas)
		keepInitial(&p)
		out = append(out, p)
	}
	return out, nil
}

// rackInterleave orders brokers so consecutive entries alternate racks
// (brokers sorted by id within a rack, racks by name); without racks it is
// the id order.
func rackInterleave(bs []Broker) []Broker {
	sort.Slice(bs, func(i, j int) bool { return bs[i].ID < bs[j].ID })
	byRack := map[string][]Broker{}
	var racks []string
	for _, b := range bs {
		if _, ok := byRack[b.Rack]; !ok {
			racks = append(racks, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	if len(racks) <= 1 {
		return bs
	}
	sort.Strings(racks)
	out := make([]Broker, 0, len(bs))
	for i := 0; len(out) < len(bs); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}

func containsInt32(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func alterMap(cur, set map[string]string, del []string) map[string]string {
	out := maps.Clone(cur)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, set)
	for _, k := range del {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (a *applier) put(b *bolt.Bucket, k, v []byte) {
	if err := b.Put(k, v); err != nil {
		panic(fmt.Sprintf("metastore: put: %v", err))
	}
}

func (a *applier) del(b *bolt.Bucket, k []byte) {
	if err := b.Delete(k); err != nil {
		panic(fmt.Sprintf("metastore: delete: %v", err))
	}
}

func (a *applier) topicByID(id TopicID) (*Topic, bool) {
	v := a.tx.Bucket(bucketTopics).Get(id[:])
	if v == nil {
		return nil, false
	}
	var t Topic
	mustUnmarshal(v, &t)
	return &t, true
}

func (a *applier) topicByName(name string) (*Topic, bool) {
	id := a.tx.Bucket(bucketTopicNames).Get([]byte(name))
	if id == nil {
		return nil, false
	}
	var tid TopicID
	copy(tid[:], id)
	return a.topicByID(tid)
}

// checkPartitionLimit fails with ErrPartitionLimit when adding n
// partitions would make the cluster hold more than limit (0: no limit).
// It reads every topic: creations are rare, and the count then needs no
// state of its own to keep right across snapshots.
func (a *applier) checkPartitionLimit(limit, n int64) error {
	if limit <= 0 {
		return nil
	}
	total := n
	var t struct{ Partitions []json.RawMessage }
	err := a.tx.Bucket(bucketTopics).ForEach(func(_, v []byte) error {
		t.Partitions = t.Partitions[:0]
		if err := json.Unmarshal(v, &t); err != nil {
			return err
		}
		total += int64(len(t.Partitions))
		return nil
	})
	if err != nil {
		return err
	}
	if total > limit {
		return ErrPartitionLimit
	}
	return nil
}

func (a *applier) putTopic(t *Topic) {
	for i := range t.Partitions {
		markDeparted(&t.Partitions[i])
	}
	t.Revision = a.index
	a.put(a.tx.Bucket(bucketTopics), t.ID[:], mustJSON(t))
	a.put(a.tx.Bucket(bucketTopicNames), []byte(t.Name), t.ID[:])
	cp := cloneTopic(*t)
	a.events = append(a.events, event{Rev: a.index, Kind: "topic", ID: t.ID, Topic: &cp})
}

// groupOwner reads a group's owner record: the broker and the
// incarnation it claimed under (0 for a record written before fencing, or
// by an unfenced claim).
func (a *applier) groupOwner(group string) (broker int32, inc uint64, ok bool) {
	v := a.tx.Bucket(bucketGroupOwners).Get([]byte(group))
	if len(v) < 4 {
		return 0, 0, false
	}
	if len(v) >= 12 {
		inc = binary.BigEndian.Uint64(v[4:12])
	}
	return brokerFromKey(v[:4]), inc, true
}

// decodeOwner reads an ownerValue.
func decodeOwner(v []byte) (broker int32, inc uint64, ok bool) {
	if len(v) < 4 {
		return 0, 0, false
	}
	if len(v) >= 12 {
		inc = binary.BigEndian.Uint64(v[4:12])
	}
	return brokerFromKey(v[:4]), inc, true
}

// checkShareFence refuses a share-partition state write (c.Inc set) unless
// c.BrokerID holds the share-partition under incarnation c.Inc and is
// registered with it.
func (a *applier) checkShareFence(c *command) error {
	if c.Inc == 0 {
		return nil
	}
	owner, inc, ok := decodeOwner(a.tx.Bucket(bucketShareOwners).Get(shareOwnerKey(c.Group, *c.TopicID, c.Partition)))
	if !ok || owner != c.BrokerID || inc != c.Inc || !a.liveOwner(owner, inc) {
		return ErrFenced
	}
	return nil
}

// delShareOwners drops every share-partition claim of group.
func (a *applier) delShareOwners(group string) {
	sob := a.tx.Bucket(bucketShareOwners)
	prefix := shareOwnerPrefix(group)
	var keys [][]byte
	cur := sob.Cursor()
	for k, _ := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = cur.Next() {
		keys = append(keys, append([]byte{}, k...))
	}
	for _, k := range keys {
		a.del(sob, k)
	}
}

func ownerValue(broker int32, inc uint64) []byte {
	return binary.BigEndian.AppendUint64(brokerKey(broker), inc)
}

// A group's owner record is the owner's broker (4 bytes) and incarnation
// (8), then the last write sequence applied in each of the owner's write
// streams (8 each, streamOffsets first; trailing zeros are left out, and
// readers of the first 12 bytes ignore them). A claim writes the record
// anew, its streams at the claim's sequence (none for an unnumbered one).
//
// A coordinator writes a group's offsets (commits, transactional offset
// commits, offset deletes) one at a time, and its state saves one at a
// time, but the two go concurrently; a group delete follows both. So a
// write is ordered only against those of its own stream.
const (
	streamOffsets = iota
	streamState
	numStreams
)

func ownerSeqs(v []byte) (seqs [numStreams]uint64) {
	for i := range seqs {
		if len(v) >= 20+8*i {
			seqs[i] = binary.BigEndian.Uint64(v[12+8*i:])
		}
	}
	return seqs
}

func ownerRecord(broker int32, inc uint64, seqs [numStreams]uint64) []byte {
	v := ownerValue(broker, inc)
	n := numStreams
	for n > 0 && seqs[n-1] == 0 {
		n--
	}
	for _, seq := range seqs[:n] {
		v = binary.BigEndian.AppendUint64(v, seq)
	}
	return v
}

// checkWriteOrder refuses a fenced group write (checkFence passed: the
// record is the writer's) whose write sequence is below the last one
// applied in any of streams, and records a higher one. Writes without one
// (from a version before it, or unfenced) are not ordered.
func (a *applier) checkWriteOrder(c *command, streams ...int) error {
	if c.Inc == 0 || c.WriteSeq == 0 {
		return nil
	}
	gob := a.tx.Bucket(bucketGroupOwners)
	seqs := ownerSeqs(gob.Get([]byte(c.Group)))
	raised := false
	for _, s := range streams {
		switch {
		case c.WriteSeq < seqs[s]:
			return ErrOvertaken
		case c.WriteSeq > seqs[s]:
			seqs[s], raised = c.WriteSeq, true
		}
	}
	if raised {
		a.put(gob, []byte(c.Group), ownerRecord(c.BrokerID, c.Inc, seqs))
	}
	return nil
}

// liveOwner says whether an owner record still holds: its broker is
// registered, with the incarnation it claimed under (any, for 0).
func (a *applier) liveOwner(broker int32, inc uint64) bool {
	b, ok := a.broker(broker)
	return ok && (inc == 0 || b.Incarnation == inc)
}

// checkFence refuses a fenced group write (c.Inc set) unless c.BrokerID
// owns the group under incarnation c.Inc and is registered with it.
func (a *applier) checkFence(c *command) error {
	if c.Inc == 0 {
		return nil
	}
	owner, inc, ok := a.groupOwner(c.Group)
	if !ok || owner != c.BrokerID || inc != c.Inc || !a.liveOwner(owner, inc) {
		return ErrFenced
	}
	return nil
}

func (a *applier) broker(id int32) (Broker, bool) {
	v := a.tx.Bucket(bucketBrokers).Get(brokerKey(id))
	if v == nil {
		return Broker{}, false
	}
	var b Broker
	mustUnmarshal(v, &b)
	return b, true
}

func (a *applier) putBroker(b Broker) {
	a.put(a.tx.Bucket(bucketBrokers), brokerKey(b.ID), mustJSON(b))
	cp := cloneBroker(b)
	a.events = append(a.events, event{Rev: a.index, Kind: "broker", BrokerID: b.ID, Broker: &cp})
}

func (a *applier) brokers() []Broker {
	var out []Broker
	_ = a.tx.Bucket(bucketBrokers).ForEach(func(_, v []byte) error {
		var b Broker
		mustUnmarshal(v, &b)
		out = append(out, b)
		return nil
	})
	return out
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("metastore: encode %T: %v", v, err))
	}
	return b
}

func mustUnmarshal(b []byte, v any) {
	if err := json.Unmarshal(b, v); err != nil {
		panic(fmt.Sprintf("metastore: corrupt value for %T: %v", v, err))
	}
}

// loadImage reads the cache-visible state from a transaction.
func loadImage(tx *bolt.Tx) *image {
	img := &image{BrokerConfigs: map[int32]map[string]string{}}
	m := tx.Bucket(bucketMeta)
	img.Rev = getU64(m.Get(keyApplied))
	img.ClusterID = string(m.Get(keyClusterID))
	img.LeaseMs = int64(getU64(m.Get(keyBrokerLease)))
	_ = tx.Bucket(bucketTopics).ForEach(func(_, v []byte) error {
		var t Topic
		mustUnmarshal(v, &t)
		img.Topics = append(img.Topics, t)
		return nil
	})
	_ = tx.Bucket(bucketBrokers).ForEach(func(_, v []byte) error {
		var b Broker
		mustUnmarshal(v, &b)
		img.Brokers = append(img.Brokers, b)
		return nil
	})
	_ = tx.Bucket(bucketBrokerConfigs).ForEach(func(k, v []byte) error {
		var c map[string]string
		mustUnmarshal(v, &c)
		img.BrokerConfigs[brokerFromKey(k)] = c
		return nil
	})
	_ = tx.Bucket(bucketGroupConfigs).ForEach(func(k, v []byte) error {
		var c map[string]string
		mustUnmarshal(v, &c)
		if img.GroupConfigs == nil {
			img.GroupConfigs = map[string]map[string]string{}
		}
		img.GroupConfigs[string(k)] = c
		return nil
	})
	loadScram(tx, img)
	img.Quotas = loadClientQuotas(tx)
	_ = tx.Bucket(bucketACLs).ForEach(func(_, v []byte) error {
		var b acl.Binding
		mustUnmarshal(v, &b)
		img.ACLs = append(img.ACLs, b)
		return nil
	})
	if v := m.Get(keyDecommissioned); v != nil {
		mustUnmarshal(v, &img.Decommissioned)
	}
	if v := m.Get(keySuperUsers); v != nil {
		mustUnmarshal(v, &img.SuperUsers)
	}
	return img
}

// placeVoterless gives a registering write broker the partitions placed
// on no voter: those of topics created while no write broker was
// registered (a sole broker between its lease's expiry and its
// registration again). Without a voter such a partition has no leader
// ever; it gets this broker as its only voter and leader.
func (a *applier) placeVoterless(br Broker) {
	switch br.Role {
	case RoleWrite, RoleCombined, "":
	default:
		return
	}
	for _, t := range a.topics() {
		changed := false
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if len(p.Voters) > 0 || p.Target != nil {
				continue
			}
			p.Voters, p.Leader, p.ISR = []int32{br.ID}, br.ID, nil
			p.Learners = slices.DeleteFunc(p.Learners, func(id int32) bool { return id == br.ID })
			// A new group: this broker founds it, whatever it was
			// before.
			p.InitVoters, p.InitLearners, p.Departed = nil, nil, nil
			keepInitial(p)
			changed = true
		}
		if changed {
			a.putTopic(t)
		}
	}
}
