package metastore

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
)

// Learner placement: which read brokers hold a partition, by the topic's
// read.replicas.
//
// Every decision is made in apply from the transaction and the command
// alone, so every meta node places the same learners. A topic's
// read.replicas is its own config, else the cluster-wide dynamic broker
// default of the same name, else -1. The static or per-broker value of a
// broker cannot count: apply does not see it, and brokers configured
// differently would make meta nodes disagree (the server refuses a
// per-broker value for this reason).
//
//	-1  every registered read broker is a learner of every partition
//	 0  no learners; the partition's voters are its only replicas
//	 n  n learners per partition (fewer while fewer read brokers exist)
//
// Candidates for a partition are ranked by rendezvous hashing of (topic
// id, partition, broker id): each partition prefers its own order of
// brokers, so partitions spread evenly over the read brokers and a broker
// that joins or leaves moves only the slots it takes or frees. When racks
// are known, a candidate on a rack the partition's learners do not cover
// yet goes first. Shrinking drops learners whose broker is not registered
// first (they serve nobody), then the lowest ranked.

// ReadReplicasConfig is the topic config (and cluster-wide broker default)
// that sets how many read brokers are learners of each partition.
const ReadReplicasConfig = "read.replicas"

// readReplicas is the effective read.replicas of a topic with these
// explicitly set configs.
func (a *applier) readReplicas(topicConfigs map[string]string) int {
	if v, ok := topicConfigs[ReadReplicasConfig]; ok {
		return parseReadReplicas(v)
	}
	if v := a.tx.Bucket(bucketBrokerConfigs).Get(brokerKey(-1)); v != nil {
		var cluster map[string]string
		mustUnmarshal(v, &cluster)
		if s, ok := cluster[ReadReplicasConfig]; ok {
			return parseReadReplicas(s)
		}
	}
	return -1
}

// parseReadReplicas reads a stored value. Brokers validate values before
// they propose them; anything else still stored (a value written by a
// broker that did not check) means every read broker, the behaviour before
// the config existed, rather than a failure of apply.
func parseReadReplicas(v string) int {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < -1 {
		return -1
	}
	return int(n)
}

// readBrokers returns the registered brokers that hold learner replicas
// (read and combined), by id.
func readBrokers(brokers []Broker) []Broker {
	var out []Broker
	for _, b := range brokers {
		if b.Role == RoleRead || b.Role == RoleCombined {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// rendezvousScore is broker's weight for one partition; higher is
// preferred. FNV-1a is stable across Go versions and platforms, which the
// determinism of apply needs.
func rendezvousScore(topic TopicID, partition, broker int32) uint64 {
	h := fnv.New64a()
	var b [8]byte
	h.Write(topic[:])
	binary.BigEndian.PutUint32(b[:4], uint32(partition))
	binary.BigEndian.PutUint32(b[4:], uint32(broker))
	h.Write(b[:])
	return h.Sum64()
}

// byScore sorts broker ids by descending score for one partition (ties,
// which need a hash collision, by id).
func byScore(topic TopicID, partition int32, ids []int32) {
	sort.Slice(ids, func(i, j int) bool {
		si, sj := rendezvousScore(topic, partition, ids[i]), rendezvousScore(topic, partition, ids[j])
		if si != sj {
			return si > sj
		}
		return ids[i] < ids[j]
	})
}

// fillLearners adds read brokers to p's learners until it has want (every
// read broker when want < 0). Brokers already in p (voters, a target,
// learners) are not candidates. It reports whether p changed; the caller
// records the initial configuration first (keepInitial) where p already
// exists, since placePartitions fills a partition before it has one.
func fillLearners(topic TopicID, p *Partition, readers []Broker, want int) bool {
	rack := map[int32]string{}
	var cands []int32
	for _, b := range readers {
		rack[b.ID] = b.Rack
		if slices.Contains(p.Voters, b.ID) || slices.Contains(p.Target, b.ID) || slices.Contains(p.Learners, b.ID) {
			continue
		}
		cands = append(cands, b.ID)
	}
	if want < 0 {
		want = len(p.Learners) + len(cands)
	}
	if len(p.Learners) >= want || len(cands) == 0 {
		return false
	}
	byScore(topic, p.ID, cands)
	covered := map[string]bool{}
	for _, l := range p.Learners {
		if r, ok := rack[l]; ok && r != "" {
			covered[r] = true
		}
	}
	var add []int32
	// First pass: one per rack not covered yet, in rank order; second
	// pass: the rest in rank order.
	for _, id := range cands {
		if len(p.Learners)+len(add) >= want {
			break
		}
		if r := rack[id]; r != "" && !covered[r] {
			covered[r] = true
			add = append(add, id)
		}
	}
	for _, id := range cands {
		if len(p.Learners)+len(add) >= want {
			break
		}
		if !slices.Contains(add, id) {
			add = append(add, id)
		}
	}
	if len(add) == 0 {
		return false
	}
	p.Learners = append(p.Learners, add...)
	slices.Sort(p.Learners)
	return true
}

// trimLearners removes learners beyond want (nothing when want < 0):
// those whose broker is not registered first, then the lowest ranked. It
// reports whether p changed.
func trimLearners(topic TopicID, p *Partition, readers []Broker, want int) bool {
	if want < 0 || len(p.Learners) <= want {
		return false
	}
	live := map[int32]bool{}
	for _, b := range readers {
		live[b.ID] = true
	}
	keep := slices.Clone(p.Learners)
	byScore(topic, p.ID, keep)
	sort.SliceStable(keep, func(i, j int) bool { return live[keep[i]] && !live[keep[j]] })
	keep = keep[:want]
	p.Learners = slices.DeleteFunc(p.Learners, func(id int32) bool { return !slices.Contains(keep, id) })
	return true
}

// balanceLearners brings every partition of t to its read.replicas:
// shrinks when there are too many, grows with registered read brokers
// when there are too few.
func (a *applier) balanceLearners(t *Topic, readers []Broker) bool {
	want := a.readReplicas(t.Configs)
	changed := false
	for i := range t.Partitions {
		p := &t.Partitions[i]
		// Work on a copy so the initial configuration can still be
		// recorded from the placement before the change.
		q := *p
		q.Learners = slices.Clone(p.Learners)
		trimmed := trimLearners(t.ID, &q, readers, want)
		filled := fillLearners(t.ID, &q, readers, want)
		if trimmed || filled {
			keepInitial(p)
			p.Learners = q.Learners
			changed = true
		}
	}
	return changed
}

// fillTopic tops up every partition of t that has fewer learners than its
// read.replicas from the registered read brokers (a broker registered, or
// a learner was retired).
func (a *applier) fillTopic(t *Topic, readers []Broker) bool {
	want := a.readReplicas(t.Configs)
	changed := false
	for i := range t.Partitions {
		p := &t.Partitions[i]
		q := *p
		q.Learners = slices.Clone(p.Learners)
		if fillLearners(t.ID, &q, readers, want) {
			keepInitial(p)
			p.Learners = q.Learners
			changed = true
		}
	}
	return changed
}

// rebalanceClusterDefault applies a change of the cluster-wide
// read.replicas to every topic that does not set its own.
func (a *applier) rebalanceClusterDefault() {
	readers := readBrokers(a.placeable())
	for _, t := range a.topics() {
		if _, own := t.Configs[ReadReplicasConfig]; own {
			continue
		}
		if a.balanceLearners(t, readers) {
			a.putTopic(t)
		}
	}
}

// touches reports whether a config command sets or removes key.
func touches(c *command, key string) bool {
	_, set := c.Set[key]
	return set || slices.Contains(c.Del, key)
}
