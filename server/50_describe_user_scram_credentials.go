package server

import (
	"sort"

	"github.com/sluice-broker/sluice/acl"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeUserScramCredentials (key 50). Supported: v0.
//
// Semantics: lists each user's SCRAM mechanisms and iteration counts
// (never salts or keys), from this broker's view of the metastore. A null
// or empty user list describes every user with a credential; a named user
// without one gets RESOURCE_NOT_FOUND, a user named twice
// DUPLICATE_RESOURCE, as Kafka answers. It needs DESCRIBE on the cluster
// (else CLUSTER_AUTHORIZATION_FAILED).
// Version notes: v0 flexible.
// Roles: every broker.
func init() { register(50, handleDescribeUserScramCredentials) }

func handleDescribeUserScramCredentials(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.authorizeCluster(rc, acl.OpDescribe) {
		// As Kafka's error response: the error at the top and in one
		// result per user named, which it leaves without the name.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("DESCRIBE on the cluster is required")
		for range req.Users {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.ErrorCode, res.ErrorMessage = resp.ErrorCode, resp.ErrorMessage
			res.CredentialInfos = []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
			resp.Results = append(resp.Results, res)
		}
		return resp, nil
	}
	cc, ok := s.catalog.(credentialCatalog)
	if !ok {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil
	}
	users := cc.ScramUsers()
	names := make([]string, 0, len(req.Users))
	for _, u := range req.Users {
		names = append(names, u.Name)
	}
	if len(names) == 0 {
		for u := range users {
			names = append(names, u)
		}
		sort.Strings(names)
	}
	seen := map[string]int{}
	for _, n := range names {
		seen[n]++
	}
	for _, n := range names {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = n
		switch creds, ok := users[n]; {
		case seen[n] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + n)
		case !ok:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + n)
		default:
			for _, c := range creds {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = scramMechanismCode(c.Mechanism), c.Iterations
				r.CredentialInfos = append(r.CredentialInfos, ci)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// SCRAM mechanisms as the protocol numbers them (Kafka's ScramMechanism).
func scramMechanismCode(name string) int8 {
	switch name {
	case "SCRAM-SHA-256":
		return 1
	case "SCRAM-SHA-512":
		return 2
	}
	return 0
}

func scramMechanismName(code int8) string {
	switch code {
	case 1:
		return "SCRAM-SHA-256"
	case 2:
		return "SCRAM-SHA-512"
	}
	return ""
}
