package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/protocol"
)

// ApiVersions (key 18). Supported: see protocol/versions.go.
//
// Never refused: an unknown version is answered by conn.handle with
// UNSUPPORTED_VERSION and a v0 body (KIP-511), and the response header is
// always v0 (protocol.AppendResponse).
// The ACL APIs (29-31) are listed only when the authorizer is on, the
// share group APIs (76-79) only by a single node (server/share.go).
// Version notes: v1 ThrottleMillis; v3+ flexible, client software name;
// v5 cluster id and node id in the request.
// Roles: every broker.
func init() { register(18, handleApiVersions) }

func handleApiVersions(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	return s.apiVersionsResponse(req.Version), nil
}

func (s *Server) apiVersionsResponse(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	for _, key := range protocol.Keys() {
		if aclAPI(key) && s.authz == nil || shareAPI(key) && !s.shareServed() {
			continue
		}
		r, _ := protocol.Versions(key)
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, r.Min, r.Max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}
