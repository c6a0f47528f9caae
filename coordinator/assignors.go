package coordinator

import (
	"sort"

	"github.com/sluice-broker/sluice/metastore"
)

// assignInput is what a server-side assignor sees: each member's
// subscribed topics (resolved, existing ones only), the topics, and each
// member's current target, for stickiness.
type assignInput struct {
	subs    map[string]map[string]bool // member -> topic names
	topics  map[string]metastore.Topic
	current map[string]tpSet
}

func (in assignInput) memberIDs() []string {
	ids := make([]string, 0, len(in.subs))
	for id := range in.subs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// assignRange is the range assignor: per topic, the members subscribed to
// it, sorted by member id, each get a contiguous range of partitions; the
// first (partitions mod members) get one more.
func assignRange(in assignInput) map[string]tpSet {
	out := map[string]tpSet{}
	ids := in.memberIDs()
	for _, id := range ids {
		out[id] = tpSet{}
	}
	for _, name := range sortedKeys(in.topics) {
		t := in.topics[name]
		var ms []string
		for _, id := range ids {
			if in.subs[id][name] {
				ms = append(ms, id)
			}
		}
		if len(ms) == 0 {
			continue
		}
		n := len(t.Partitions)
		per, extra := n/len(ms), n%len(ms)
		p := 0
		for i, id := range ms {
			cnt := per
			if i < extra {
				cnt++
			}
			for j := 0; j < cnt; j++ {
				out[id][tp{t.ID, int32(p)}] = struct{}{}
				p++
			}
		}
	}
	return out
}

// assignUniform is the uniform assignor: every subscribed partition goes
// to exactly one subscribed member, the counts per member differ by at most
// one where subscriptions allow, and partitions stay where they were when
// that keeps the balance (sticky).
func assignUniform(in assignInput) map[string]tpSet {
	ids := in.memberIDs()
	out := map[string]tpSet{}
	for _, id := range ids {
		out[id] = tpSet{}
	}
	if len(ids) == 0 {
		return out
	}
	// Every partition and who may take it.
	type part struct {
		k        tp
		eligible []string
	}
	var parts []part
	exists := map[tp]bool{}
	for _, name := range sortedKeys(in.topics) {
		t := in.topics[name]
		var el []string
		for _, id := range ids {
			if in.subs[id][name] {
				el = append(el, id)
			}
		}
		if len(el) == 0 {
			continue
		}
		for p := range t.Partitions {
			k := tp{t.ID, int32(p)}
			parts = append(parts, part{k, el})
			exists[k] = true
		}
	}
	eligible := func(id string, k tp) bool {
		for name, t := range in.topics {
			if t.ID == k.id {
				return in.subs[id][name]
			}
		}
		return false
	}
	// Fair share: with everyone eligible for everything, ceil(P/M).
	quota := (len(parts) + len(ids) - 1) / len(ids)
	taken := map[tp]string{}
	// 1. Keep current partitions that are still valid, up to the quota.
	for _, id := range ids {
		for _, k := range in.current[id].sorted() {
			if len(out[id]) >= quota {
				break
			}
			if exists[k] && taken[k] == "" && eligible(id, k) {
				out[id][k] = struct{}{}
				taken[k] = id
			}
		}
	}
	// 2. Hand out the rest to the least-loaded eligible member.
	for _, pt := range parts {
		if taken[pt.k] != "" {
			continue
		}
		best := ""
		for _, id := range pt.eligible {
			if best == "" || len(out[id]) < len(out[best]) {
				best = id
			}
		}
		out[best][pt.k] = struct{}{}
		taken[pt.k] = best
	}
	// 3. Even out: move from the most to the least loaded while that
	// narrows a gap of more than one.
	for moved := true; moved; {
		moved = false
		for _, pt := range parts {
			from := taken[pt.k]
			to := from
			for _, id := range pt.eligible {
				if len(out[id]) < len(out[to]) {
					to = id
				}
			}
			if len(out[from])-len(out[to]) > 1 {
				delete(out[from], pt.k)
				out[to][pt.k] = struct{}{}
				taken[pt.k] = to
				moved = true
			}
		}
	}
	return out
}
