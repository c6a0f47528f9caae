package server

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// CreateAcls (key 30). Supported: v0-3, advertised only with an authorizer
// (SECURITY_DISABLED without one).
//
// Semantics: Kafka's. Each creation is checked as Kafka's controller
// checks it (acl.Binding.Validate: LITERAL or PREFIXED, a concrete
// resource type, operation and permission, a non-empty name, kafka-cluster
// for CLUSTER, a principal Type:name) and refused alone with
// INVALID_REQUEST; the valid ones are stored in the metastore in one
// command (a binding that exists already is a success). Needs ALTER on the
// cluster (CLUSTER_AUTHORIZATION_FAILED for every creation). Once answered
// the binding holds on this broker; other brokers follow their metastore
// watch, within a second.
// Version notes: v1 pattern types (v0 is LITERAL); v2+ flexible.
// Roles: every broker.
func init() { register(30, handleCreateAcls) }

func handleCreateAcls(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	all := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = e.Code, kmsg.StringPtr(msg)
		}
		return resp, nil
	}
	if s.authz == nil {
		return all(kerr.SecurityDisabled, "no authorizer is configured on the broker")
	}
	if !s.authorizeCluster(rc, acl.OpAlter) {
		return all(kerr.ClusterAuthorizationFailed, "ALTER on the cluster is required to create ACLs")
	}
	var valid []acl.Binding
	var at []int
	for i, c := range req.Creations {
		b := acl.Binding{
			ResourceType: acl.ResourceType(c.ResourceType),
			ResourceName: c.ResourceName,
			PatternType:  acl.PatternType(c.ResourcePatternType),
			Principal:    c.Principal,
			Host:         c.Host,
			Operation:    acl.Operation(c.Operation),
			Permission:   acl.Permission(c.PermissionType),
		}
		if req.Version == 0 {
			b.PatternType = acl.PatternLiteral
		}
		if err := b.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		valid = append(valid, b)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return resp, nil
	}
	rc.later(func() kmsg.Response {
		if err := s.acls.CreateACLs(rc.ctx(), valid); err != nil {
			code, msg := errorCode(err), errorMessage(err)
			if errors.Is(err, acl.ErrInvalid) {
				code = kerr.InvalidRequest.Code
			}
			for _, i := range at {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
			}
		}
		return resp
	})
	return nil, nil
}
