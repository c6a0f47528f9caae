package coordinator

import (
	"context"
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// authorizedOperationsUnset is Kafka's INT32_MIN "not requested" marker.
const authorizedOperationsUnset = -2147483648

// groupOps are the operations a client may perform on a group with no
// authorizer: READ (3), DELETE (6), DESCRIBE (8), as a bit field.
const groupOps = 1<<3 | 1<<6 | 1<<8

// stateLocked is the group's state as ListGroups and the describe APIs
// name it.
func (g *group) stateLocked() string {
	if g.typ == typeConsumer {
		return g.cg.stateLocked()
	}
	if g.typ == typeShare {
		return g.sg.stateLocked()
	}
	return g.state.String()
}

func (g *group) protocolTypeLocked() string {
	if g.typ == typeConsumer {
		return "consumer"
	}
	if g.typ == typeShare {
		return "share"
	}
	return g.protocolType
}

// ListGroups (key 16). Lists the groups this broker coordinates, filtered
// by state (v4+) and type (v5+), both case-insensitive.
func (c *Coordinator) ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	names, err := c.store.ListGroups(ctx)
	if err != nil {
		resp.ErrorCode = storeCode(err)
		return resp
	}
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	c.mu.Lock()
	for name := range c.mu.groups {
		names = append(names, name) // groups with neither metadata nor offsets yet
	}
	c.mu.Unlock()
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		g, code := c.getGroup(ctx, name, lookupExisting)
		if code != 0 {
			continue // owned elsewhere, or gone
		}
		g.mu.Lock()
		if g.dead {
			g.mu.Unlock()
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group = name
		lg.ProtocolType = g.protocolTypeLocked()
		lg.GroupState = g.stateLocked()
		lg.GroupType = g.typ.String()
		g.mu.Unlock()
		if req.Version >= 4 && !match(req.StatesFilter, lg.GroupState) {
			continue
		}
		if req.Version >= 5 && !match(req.TypesFilter, lg.GroupType) {
			continue
		}
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

// DescribeGroups (key 15) describes classic groups. A group that does not
// exist, or is not a classic group, is Dead (and from v6 carries
// GROUP_ID_NOT_FOUND with a message), as Kafka 4 answers.
func (c *Coordinator) DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = name
		dg.AuthorizedOperations = authorizedOperationsUnset
		if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupOps
		}
		code, msg := c.describeGroup(ctx, name, typeClassic, func(g *group) { g.describeLocked(&dg) })
		switch {
		case code == kerr.GroupIDNotFound.Code:
			dg.State = "Dead"
			if req.Version >= 6 {
				dg.ErrorCode, dg.ErrorMessage = code, msg
			}
		case code != 0:
			dg.ErrorCode = code
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// describeGroup serves one group of a Describe request for groups of type
// typ: describe runs under the group's lock when the group exists, is
// coordinated here and has that type. Otherwise the answer is Kafka's:
// GROUP_ID_NOT_FOUND with "Group X not found." or "Group X is not a <type>
// group.", NOT_COORDINATOR for a group this broker just gave up, or the
// lookup's own code. DescribeGroups, ConsumerGroupDescribe and
// ShareGroupDescribe differ only in how they report these.
func (c *Coordinator) describeGroup(ctx context.Context, name string, typ groupType, describe func(*group)) (int16, *string) {
	g, code := c.getGroup(ctx, name, lookupExisting)
	if code == kerr.GroupIDNotFound.Code {
		return code, kmsg.StringPtr("Group " + name + " not found.")
	}
	if code != 0 {
		return code, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.dead:
		return kerr.NotCoordinator.Code, nil
	case g.typ != typ:
		return kerr.GroupIDNotFound.Code, kmsg.StringPtr("Group " + name + " is not a " + typ.String() + " group.")
	}
	describe(g)
	return 0, nil
}

func (g *group) describeLocked(dg *kmsg.DescribeGroupsResponseGroup) {
	dg.State = g.state.String()
	dg.ProtocolType = g.protocolType
	stable := g.state == stateStable
	if stable {
		dg.Protocol = g.protocol
	}
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = m.instanceID
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.ProtocolMetadata = []byte{}
		dm.MemberAssignment = []byte{}
		if stable {
			for _, p := range m.protocols {
				if p.Name == g.protocol {
					dm.ProtocolMetadata = p.Metadata
				}
			}
			dm.MemberAssignment = g.assignmentOrEmpty(m.assignment)
		}
		dg.Members = append(dg.Members, dm)
	}
}

// DeleteGroups (key 42). Only an empty group can be deleted
// (NON_EMPTY_GROUP); deleting removes its metadata, its offsets and its
// ownership from the metastore at once.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = name
		dg.ErrorCode = c.deleteGroup(ctx, name)
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) deleteGroup(ctx context.Context, name string) int16 {
	g, code := c.getGroup(ctx, name, lookupExisting)
	if code != 0 {
		return code
	}
	// After the group's offset writes already checked (commitSem), so
	// none of them lands after the delete.
	if !g.lockCommits(ctx) {
		return kerr.CoordinatorNotAvailable.Code
	}
	defer g.unlockCommits()
	c.mu.Lock()
	defer c.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dead {
		return kerr.NotCoordinator.Code
	}
	if !g.isEmptyLocked() {
		return kerr.NonEmptyGroup.Code
	}
	if err := c.store.DeleteGroup(ctx, c.fence(), name); err != nil {
		if errors.Is(err, metastore.ErrFenced) {
			g.unloadLocked(kerr.NotCoordinator.Code)
			c.forget(g)
		}
		return storeCode(err)
	}
	g.unloadLocked(kerr.GroupIDNotFound.Code)
	c.forget(g)
	c.shareDropGroup(name)
	return 0
}
