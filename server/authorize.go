package server

import (
	"context"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
)

// Authorization (docs/security.md). With an authorizer configured every
// handler asks it, at the broker where the request arrives, with the
// connection's principal and address, which operation on which resource
// the request needs, following Kafka's KafkaApis; without one everything
// is allowed and the authorized-operations fields say so.
//
// A produce that a read broker forwards to the partition's leader is
// checked here, for the producer's principal, before it leaves; the leader
// then checks it again for the forwarding connection's principal (the read
// broker's own: its SASL user or its certificate's subject on the
// inter-broker listener, ANONYMOUS on a PLAINTEXT one; forward.go), so the
// brokers' principal needs WRITE on forwarded topics (or to be a super
// user). Admin
// requests that the metastore applies are checked here too: the metastore
// API is internal and trusts its brokers.

// ACLStore is where ACLs live: the metastore client. Its cache is the
// authorizer's source.
type ACLStore interface {
	acl.Source
	CreateACLs(ctx context.Context, bs []acl.Binding) error
	DeleteACLs(ctx context.Context, fs []acl.Filter) ([][]acl.Binding, error)
}

// who is the request's principal and client address for the authorizer.
func (rc *reqCtx) who() acl.Request {
	return acl.Request{Principal: rc.conn.principal, Host: rc.conn.host}
}

// authorize reports whether the request may perform op on the resource;
// always true without an authorizer.
func (s *Server) authorize(rc *reqCtx, op acl.Operation, rt acl.ResourceType, name string) bool {
	return s.authz == nil || s.authz.Authorize(rc.who(), op, rt, name)
}

func (s *Server) authorizeCluster(rc *reqCtx, op acl.Operation) bool {
	return s.authorize(rc, op, acl.ResourceCluster, acl.ClusterName)
}

func (s *Server) authorizeTopic(rc *reqCtx, op acl.Operation, topic string) bool {
	return s.authorize(rc, op, acl.ResourceTopic, topic)
}

func (s *Server) authorizeGroup(rc *reqCtx, op acl.Operation, group string) bool {
	return s.authorize(rc, op, acl.ResourceGroup, group)
}

// authorizedGroups splits groups, in order, into those rc may perform op
// on and the rest (answered GROUP_AUTHORIZATION_FAILED by the caller).
func (s *Server) authorizedGroups(rc *reqCtx, op acl.Operation, groups []string) (allowed, refused []string) {
	allowed = groups[:0:0]
	for _, g := range groups {
		if s.authorizeGroup(rc, op, g) {
			allowed = append(allowed, g)
		} else {
			refused = append(refused, g)
		}
	}
	return allowed, refused
}

// authorizeCreateTopic is Kafka's rule for creating a topic (CreateTopics,
// auto-creation): CREATE on the cluster, or else on the topic.
func (s *Server) authorizeCreateTopic(rc *reqCtx, topic string) bool {
	return s.authorizeCluster(rc, acl.OpCreate) || s.authorizeTopic(rc, acl.OpCreate, topic)
}

// topicNameOf is the name a request's topic entry stands for: the name
// itself, or, byID, the name of the topic with that id; known is false for
// an id no topic has (the handler then answers UNKNOWN_TOPIC_ID, as Kafka
// does before it authorizes).
func (s *Server) topicNameOf(name string, id [16]byte, byID bool) (string, bool) {
	if !byID {
		return name, true
	}
	t, ok := s.catalog.TopicByID(metastore.TopicID(id))
	return t.Name, ok
}

// authorizedOps is an authorized-operations field: the operations of ops
// the request may perform on the resource, all of them without an
// authorizer (as Kafka reports).
func (s *Server) authorizedOps(rc *reqCtx, rt acl.ResourceType, name string, ops []acl.Operation) int32 {
	if s.authz == nil {
		return acl.OpsBits(ops)
	}
	return s.authz.AuthorizedOps(rc.who(), rt, name, ops)
}

// AuthorizerEnabled reports whether requests are checked against ACLs.
func (s *Server) AuthorizerEnabled() bool { return s.authz != nil }

// aclAPI reports whether key is an ACL API: advertised only with an
// authorizer (and answered SECURITY_DISABLED without one).
func aclAPI(key int16) bool { return key == 29 || key == 30 || key == 31 }
