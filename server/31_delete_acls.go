package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// DeleteAcls (key 31). Supported: v0-3, advertised only with an authorizer
// (SECURITY_DISABLED without one).
//
// Semantics: Kafka's. Each filter (acl.Filter, as in DescribeAcls) deletes
// the bindings it matches, in one metastore command for the request; a
// binding matched by several filters is listed under the first. A filter
// with an UNKNOWN element gets INVALID_REQUEST alone. Needs ALTER on the
// cluster (CLUSTER_AUTHORIZATION_FAILED for every filter).
// Version notes: v1 pattern types (v0 is LITERAL); v2+ flexible.
// Roles: every broker.
func init() { register(31, handleDeleteAcls) }

func handleDeleteAcls(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
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
		return all(kerr.ClusterAuthorizationFailed, "ALTER on the cluster is required to delete ACLs")
	}
	var valid []acl.Filter
	var at []int
	for i, rf := range req.Filters {
		f := acl.Filter{
			ResourceType: acl.ResourceType(rf.ResourceType),
			Name:         rf.ResourceName,
			PatternType:  acl.PatternType(rf.ResourcePatternType),
			Principal:    rf.Principal,
			Host:         rf.Host,
			Operation:    acl.Operation(rf.Operation),
			Permission:   acl.Permission(rf.PermissionType),
		}
		if req.Version == 0 {
			f.PatternType = acl.PatternLiteral
		}
		if err := f.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		valid = append(valid, f)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return resp, nil
	}
	rc.later(func() kmsg.Response {
		deleted, err := s.acls.DeleteACLs(rc.ctx(), valid)
		if err != nil {
			code, msg := errorCode(err), errorMessage(err)
			for _, i := range at {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
			}
			return resp
		}
		for j, i := range at {
			for _, b := range deleted[j] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
				m.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
				m.Principal, m.Host = b.Principal, b.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
				resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			}
		}
		return resp
	})
	return nil, nil
}
