package server

import (
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
)

// DescribeClientQuotas (key 48). Supported: v0-1.
//
// Semantics: as Kafka's ClientQuotasImage.describe: each filter component
// names an entity type (user, client-id, ip) once and matches an exact
// name, the <default> entity, or any entity that has the type; strict
// returns only entities with exactly the filtered types. An empty or
// repeated type, a null exact match, a match string with the other match
// types, or ip mixed with user or client-id is INVALID_REQUEST; an
// unknown type UNSUPPORTED_VERSION, as Kafka answers.
// Version notes: v1 flexible.
// Authorization: DESCRIBE_CONFIGS on the cluster, as in Kafka.
// Roles: every broker (the metastore's quotas, from its local cache).
func init() { register(48, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	exact := map[string]metastore.QuotaName{}
	typed := map[string]bool{}
	fail := func(code int16, format string, args ...any) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(fmt.Sprintf(format, args...))
		return resp, nil
	}
	if !s.authorizeCluster(rc, acl.OpDescribeConfigs) {
		return fail(kerr.ClusterAuthorizationFailed.Code, "DESCRIBE_CONFIGS on the cluster is required")
	}
	for _, c := range req.Components {
		if c.EntityType == "" {
			return fail(kerr.InvalidRequest.Code, "Invalid empty entity type.")
		}
		if _, dup := exact[c.EntityType]; dup || typed[c.EntityType] {
			return fail(kerr.InvalidRequest.Code, "Entity type %s cannot appear more than once in the filter.", c.EntityType)
		}
		if !slices.Contains(quotaEntityTypes, c.EntityType) {
			return fail(kerr.UnsupportedVersion.Code, "Unsupported entity type %s", c.EntityType)
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return fail(kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
			exact[c.EntityType] = metastore.QuotaName{Set: true, Name: *c.Match}
		case kmsg.QuotasMatchTypeDefault:
			if c.Match != nil {
				return fail(kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
			}
			exact[c.EntityType] = metastore.QuotaName{Set: true, Default: true}
		case kmsg.QuotasMatchTypeAny:
			if c.Match != nil {
				return fail(kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
			typed[c.EntityType] = true
		default:
			return fail(kerr.InvalidRequest.Code, "Unknown match type %d", c.MatchType)
		}
	}
	has := func(t string) bool { _, e := exact[t]; return e || typed[t] }
	if has(quotaIP) && (has(quotaUser) || has(quotaClientID)) {
		return fail(kerr.InvalidRequest.Code, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
	}
	// Entries is nullable: null with an error, an array (maybe empty)
	// without; the Java admin client reads a null one as a failure.
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	_, quotas := s.catalog.ClientQuotas()
	for _, q := range quotas {
		parts := quotaParts(q.Entity)
		if req.Strict && len(parts) != len(exact)+len(typed) {
			continue
		}
		match := true
		for t, want := range exact {
			if parts[t] != want {
				match = false
			}
		}
		for t := range typed {
			if !parts[t].Set {
				match = false
			}
		}
		if !match {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, t := range quotaEntityTypes {
			if n := parts[t]; n.Set {
				ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
				ee.Type = t
				if !n.Default {
					ee.Name = kmsg.StringPtr(n.Name)
				}
				e.Entity = append(e.Entity, ee)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(q.Values)) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp, nil
}
