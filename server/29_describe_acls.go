package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// DescribeAcls (key 29). Supported: v0-3, advertised only with an
// authorizer (SECURITY_DISABLED without one).
//
// Semantics: Kafka's. The filter selects bindings as Kafka's
// AclBindingFilter does (acl.Filter: ANY, MATCH, LITERAL and PREFIXED
// pattern filters, null fields match anything); a filter with an UNKNOWN
// element gets INVALID_REQUEST. Needs DESCRIBE on the cluster
// (CLUSTER_AUTHORIZATION_FAILED). Bindings are read from this broker's
// cache of the metastore, grouped by resource pattern.
// Version notes: v1 pattern types (v0 is LITERAL only); v2+ flexible.
// Roles: every broker.
func init() { register(29, handleDescribeAcls) }

func handleDescribeAcls(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	fail := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = e.Code, kmsg.StringPtr(msg)
		return resp, nil
	}
	if s.authz == nil {
		return fail(kerr.SecurityDisabled, "no authorizer is configured on the broker")
	}
	if !s.authorizeCluster(rc, acl.OpDescribe) {
		return fail(kerr.ClusterAuthorizationFailed, "DESCRIBE on the cluster is required to describe ACLs")
	}
	f := acl.Filter{
		ResourceType: acl.ResourceType(req.ResourceType),
		Name:         req.ResourceName,
		PatternType:  acl.PatternType(req.ResourcePatternType),
		Principal:    req.Principal,
		Host:         req.Host,
		Operation:    acl.Operation(req.Operation),
		Permission:   acl.Permission(req.PermissionType),
	}
	if req.Version == 0 {
		f.PatternType = acl.PatternLiteral
	}
	if err := f.Validate(); err != nil {
		return fail(kerr.InvalidRequest, err.Error())
	}
	type pattern struct {
		rt   acl.ResourceType
		name string
		pt   acl.PatternType
	}
	at := map[pattern]int{}
	for _, b := range s.authz.Match(f) {
		p := pattern{b.ResourceType, b.ResourceName, b.PatternType}
		i, ok := at[p]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType = kmsg.ACLResourceType(b.ResourceType)
			r.ResourceName = b.ResourceName
			r.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			i = len(resp.Resources)
			at[p] = i
			resp.Resources = append(resp.Resources, r)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host = b.Principal, b.Host
		a.Operation, a.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp, nil
}
