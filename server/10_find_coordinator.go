package server

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
)

// FindCoordinator (key 10). Supported: v0-6.
//
// Semantics: for a group (key type 0) the answer is the broker that owns
// the group in the metastore (ClaimGroup: this broker claims it unless a
// live broker already does), with that broker's endpoint on the listener
// the request came in on. For a transactional id (key type 1) it is the
// write broker that coordinates the id (txn.Owner: rendezvous hashing over
// the live write brokers; the state is in the metastore, so when that
// broker leaves the next one in the ranking takes over), with its endpoint
// on the same listener; COORDINATOR_NOT_AVAILABLE while there is none.
// For a share-partition key (key type 2, v6+, "group:topicId:partition",
// which brokers use to find the holder of a share-partition's state) it is
// the broker that holds (or claims on its first fetch) the
// share-partition: the partition's `read` view leader in a cluster, the
// node itself on a single node (server/share.go, shareLeader); for a topic
// this broker does not know, the group's coordinator. CLUSTER_ACTION is
// required as in Kafka; a malformed key or an older version is
// INVALID_REQUEST. Share groups themselves are found with key
// type 0, as Kafka's clients do.
// Version notes: v1 key type, error message, throttle; v3+ flexible; v4
// batched keys (the response's Coordinators); v5-6 no change for groups.
// Roles: every broker.
func init() { register(10, handleFindCoordinator) }

const (
	coordinatorKeyGroup = 0
	coordinatorKeyTxn   = 1
	coordinatorKeyShare = 2
)

func handleFindCoordinator(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	keyType := req.CoordinatorType
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		for _, key := range keys {
			c := s.findCoordinator(ctx, rc, req.Version, keyType, key)
			if req.Version >= 4 {
				resp.Coordinators = append(resp.Coordinators, c)
				continue
			}
			resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
			resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		}
		return resp
	})
	return nil, nil
}

func (s *Server) findCoordinator(ctx context.Context, rc *reqCtx, version int16, keyType int8, key string) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key = key
	c.NodeID, c.Port = -1, -1
	fail := func(code int16, msg string) kmsg.FindCoordinatorResponseCoordinator {
		c.ErrorCode = code
		c.ErrorMessage = kmsg.StringPtr(msg)
		return c
	}
	// Authorization, as Kafka: DESCRIBE on the group, or on the
	// transactional id.
	switch keyType {
	case coordinatorKeyGroup:
		if !s.authorizeGroup(rc, acl.OpDescribe, key) {
			return fail(kerr.GroupAuthorizationFailed.Code, "DESCRIBE on the group is required")
		}
	case coordinatorKeyTxn:
		if !s.authorize(rc, acl.OpDescribe, acl.ResourceTransactionalID, key) {
			return fail(kerr.TransactionalIDAuthorizationFailed.Code, "DESCRIBE on the transactional id is required")
		}
		if key == "" {
			return fail(kerr.InvalidRequest.Code, "empty transactional id")
		}
		owner := s.txnOwner(key)
		if owner < 0 {
			return fail(kerr.CoordinatorNotAvailable.Code, "no write broker is registered to coordinate transactions")
		}
		return s.coordinatorEndpoint(rc, c, owner, fail)
	case coordinatorKeyShare:
		if version < 6 {
			return fail(kerr.InvalidRequest.Code, "share-partition keys need FindCoordinator v6")
		}
		if !s.authorizeCluster(rc, acl.OpClusterAction) {
			return fail(kerr.ClusterAuthorizationFailed.Code, "CLUSTER_ACTION on the cluster is required")
		}
		group, id, part, ok := shareCoordinatorKey(key)
		if !ok {
			return fail(kerr.InvalidRequest.Code, "a share-partition key is group:topicId:partition")
		}
		if group == "" {
			return fail(kerr.InvalidRequest.Code, "empty group id")
		}
		if t, known := s.produceTopicByID(id); known && part < int32(len(t.Partitions)) {
			holder, _ := s.shareLeader(t, part)
			if holder < 0 {
				return fail(kerr.CoordinatorNotAvailable.Code, "the partition has no leader in the read view")
			}
			return s.coordinatorEndpoint(rc, c, holder, fail)
		}
		key = group
	default:
		return fail(kerr.InvalidRequest.Code, "unsupported coordinator key type")
	}
	if key == "" {
		return fail(kerr.InvalidRequest.Code, "empty group id")
	}
	if s.groups == nil {
		return fail(kerr.CoordinatorNotAvailable.Code, "this broker does not coordinate groups")
	}
	if s.offsets != nil {
		// Kafka creates __consumer_offsets on the first group lookup.
		s.offsets.touch()
	}
	owner, err := s.groups.Claim(ctx, key)
	if err != nil {
		return fail(kerr.CoordinatorNotAvailable.Code, err.Error())
	}
	return s.coordinatorEndpoint(rc, c, owner, fail)
}

// coordinatorEndpoint fills c with owner's endpoint on the listener the
// request came in on.
func (s *Server) coordinatorEndpoint(rc *reqCtx, c kmsg.FindCoordinatorResponseCoordinator, owner int32,
	fail func(int16, string) kmsg.FindCoordinatorResponseCoordinator) kmsg.FindCoordinatorResponseCoordinator {
	l := rc.conn.listener
	if owner == s.cfg.NodeID {
		c.NodeID, c.Host, c.Port = owner, l.host, l.port
		return c
	}
	for _, b := range s.catalog.Brokers() {
		if b.ID != owner {
			continue
		}
		for _, e := range b.Endpoints {
			if e.Name == l.cfg.Name {
				c.NodeID, c.Host, c.Port = owner, e.Host, e.Port
				return c
			}
		}
	}
	return fail(kerr.CoordinatorNotAvailable.Code, "the coordinator has no endpoint on this listener")
}

// shareCoordinatorKey parses Kafka's share-partition key
// "group:topicId:partition" (SharePartitionKey).
func shareCoordinatorKey(key string) (group string, topic metastore.TopicID, partition int32, ok bool) {
	i := strings.LastIndexByte(key, ':')
	if i < 0 {
		return "", topic, 0, false
	}
	p, err := strconv.ParseInt(key[i+1:], 10, 32)
	if err != nil || p < 0 {
		return "", topic, 0, false
	}
	rest := key[:i]
	j := strings.LastIndexByte(rest, ':')
	if j <= 0 {
		return "", topic, 0, false
	}
	// Kafka writes a Uuid as 22 characters of URL-safe base64.
	id, err := base64.RawURLEncoding.DecodeString(rest[j+1:])
	if err != nil || len(id) != 16 {
		return "", topic, 0, false
	}
	copy(topic[:], id)
	return rest[:j], topic, int32(p), true
}
