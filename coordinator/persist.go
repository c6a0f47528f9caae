package coordinator

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// storedGroup is a group's metadata as the metastore keeps it (SaveGroup's
// opaque blob), JSON with a format version. Offsets are not in it: they
// are stored per partition by CommitOffsets.
//
// A classic group is saved when a rebalance completes (the leader's
// SyncGroup: members with their assignments) and when it becomes Empty. A
// KIP-848 group is saved whenever its epoch, a member's epoch or its
// target assignment changes. A coordinator that loads the blob (restart,
// or the group moved) rebuilds the group Stable with these members, each
// with a fresh session timer, so a consumer that keeps heartbeating with
// its member id and generation carries on without a rebalance.
type storedGroup struct {
	Format       int             `json:"format"`
	Type         string          `json:"type"`
	Generation   int32           `json:"generation"`
	ProtocolType string          `json:"protocol_type,omitempty"`
	Protocol     string          `json:"protocol,omitempty"`
	Leader       string          `json:"leader,omitempty"`
	Members      []storedMember  `json:"members,omitempty"`
	Consumer     *storedConsumer `json:"consumer,omitempty"`
	Share        *storedShare    `json:"share,omitempty"`
	// EmptySinceMs: when a classic group became Empty (unix ms), for
	// offset expiry; 0 when not Empty or unknown.
	EmptySinceMs int64 `json:"empty_since_ms,omitempty"`
}

type storedMember struct {
	ID               string           `json:"id"`
	InstanceID       *string          `json:"instance_id,omitempty"`
	ClientID         string           `json:"client_id"`
	ClientHost       string           `json:"client_host"`
	SessionTimeoutMs int64            `json:"session_timeout_ms"`
	RebalanceTimeout int64            `json:"rebalance_timeout_ms"`
	Protocols        []storedProtocol `json:"protocols"`
	Assignment       []byte           `json:"assignment,omitempty"`
}

type storedProtocol struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

const storedFormat = 1

func (g *group) encodeLocked() ([]byte, error) {
	sg := storedGroup{Format: storedFormat, Type: g.typ.String(), Generation: g.generation,
		ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader}
	if g.state == stateEmpty && !g.emptySince.IsZero() {
		sg.EmptySinceMs = g.emptySince.UnixMilli()
	}
	if g.typ == typeConsumer {
		sg.Consumer = g.cg.encode()
	} else if g.typ == typeShare {
		sg.Share = g.sg.encode()
	} else {
		for _, id := range sortedKeys(g.members) {
			m := g.members[id]
			sm := storedMember{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
				SessionTimeoutMs: m.sessionTimeout.Milliseconds(), RebalanceTimeout: m.rebalanceTimeout.Milliseconds(),
				Assignment: m.assignment}
			for _, p := range m.protocols {
				sm.Protocols = append(sm.Protocols, storedProtocol{Name: p.Name, Metadata: p.Metadata})
			}
			sg.Members = append(sg.Members, sm)
		}
	}
	return json.Marshal(sg)
}

// persistLocked saves the group's metadata. The group lock is held across
// the metastore write so saves of one group apply in order. A failed save
// is logged and the in-memory state stays authoritative while this broker
// owns the group; the next save carries the whole state again.
func (g *group) persistLocked() {
	blob, err := g.encodeLocked()
	if err != nil {
		g.c.log.Error().Err(err).Str("group", g.name).Msg("encoding group state")
		return
	}
	ctx, cancel := g.c.storeCtx()
	defer cancel()
	if err := g.c.store.SaveGroup(ctx, g.c.fence(), g.name, blob); err != nil {
		if errors.Is(err, metastore.ErrFenced) {
			g.c.fenced(g)
			return
		}
		g.c.log.Warn().Err(err).Str("group", g.name).Msg("saving group state")
	}
}

// restore rebuilds a freshly made group from its stored blob. Members get
// new session timers, started now.
func (g *group) restore(blob []byte) error {
	var sg storedGroup
	if err := json.Unmarshal(blob, &sg); err != nil {
		return err
	}
	if sg.Format != storedFormat {
		return fmt.Errorf("group state format %d, want %d", sg.Format, storedFormat)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.generation = sg.Generation
	if sg.Type == "share" {
		g.typ = typeShare
		g.sg = newShareGroup(g)
		g.sg.restore(sg.Share)
		return nil
	}
	if sg.Type == "consumer" {
		g.typ = typeConsumer
		g.cg = newConsumerGroup(g)
		g.cg.restore(sg.Consumer)
		return nil
	}
	g.protocolType, g.protocol, g.leader = sg.ProtocolType, sg.Protocol, sg.Leader
	for _, sm := range sg.Members {
		m := &member{id: sm.ID, instanceID: sm.InstanceID, clientID: sm.ClientID, clientHost: sm.ClientHost,
			sessionTimeout:   time.Duration(sm.SessionTimeoutMs) * time.Millisecond,
			rebalanceTimeout: time.Duration(sm.RebalanceTimeout) * time.Millisecond,
			protocolType:     sg.ProtocolType, assignment: sm.Assignment, joinVersion: 0}
		for _, p := range sm.Protocols {
			m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		g.members[m.id] = m
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
		g.touchLocked(m)
	}
	if len(g.members) > 0 {
		g.state = stateStable
	} else {
		g.state = stateEmpty
		if sg.EmptySinceMs > 0 {
			g.emptySince = time.UnixMilli(sg.EmptySinceMs)
		}
	}
	return nil
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
