package coordinator

import (
	"context"
	"sort"

	"github.com/sluice-broker/sluice/metastore"
)

// GroupStats is what the metrics endpoint shows of one group coordinated
// here.
type GroupStats struct {
	Name    string
	State   string // as ListGroups names it
	Type    string // classic or consumer
	Members int
}

// Stats returns the groups this coordinator has loaded, by name. It takes
// each group's lock briefly and makes no metastore call.
func (c *Coordinator) Stats() []GroupStats {
	c.mu.Lock()
	gs := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	out := make([]GroupStats, 0, len(gs))
	for _, g := range gs {
		g.mu.Lock()
		if !g.dead {
			st := GroupStats{Name: g.name, State: g.stateLocked(), Type: g.typ.String(), Members: len(g.members)}
			if g.typ == typeConsumer && g.cg != nil {
				st.Members = len(g.cg.members)
			}
			if g.typ == typeShare && g.sg != nil {
				st.Members = len(g.sg.members)
			}
			out = append(out, st)
		}
		g.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Rebalances counts the rebalances completed by groups coordinated here
// since start: classic generation and KIP-848 group epoch bumps.
func (c *Coordinator) Rebalances() int64 { return c.rebalances.Load() }

// CommittedOffsets returns every offset group has committed (one
// linearizable metastore read), for the lag the metrics endpoint computes.
func (c *Coordinator) CommittedOffsets(ctx context.Context, group string) ([]metastore.OffsetCommit, error) {
	return c.store.FetchOffsets(ctx, group, nil)
}
