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
// v5 cluster id and node id in the request. v3+ carry the features: see
// features below.
// Roles: every broker.
func init() { register(18, handleApiVersions) }

func handleApiVersions(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	return s.apiVersionsResponse(req.Version, rc.conn.listener), nil
}

func (s *Server) apiVersionsResponse(version int16, l *listener) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	for _, key := range protocol.Keys() {
		if aclAPI(key) && s.authz == nil || shareAPI(key) && !s.shareServed(l) {
			continue
		}
		r, _ := protocol.Versions(key)
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, r.Min, r.Max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	if version >= 3 {
		// Features (KIP-584), tagged fields of v3+. Every broker serves
		// the same, so the feature is finalized at its supported level.
		for _, f := range features {
			sf := kmsg.NewApiVersionsResponseSupportedFeature()
			sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.min, f.max
			resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, f.max, f.max
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
		resp.FinalizedFeaturesEpoch = featuresEpoch
	}
	return resp
}

// features are the feature flags ApiVersions reports (KIP-584):
// transaction.version 2 (KIP-890 part 2) is what makes Kafka's clients
// (the Java client from 4.0, franz-go) use EndTxn v5, Produce v12 without
// AddPartitionsToTxn and TxnOffsetCommit v5 without AddOffsetsToTxn.
var features = []struct {
	name     string
	min, max int16
}{
	{"transaction.version", 0, 2},
}

// featuresEpoch is the finalized features' epoch: fixed, since they never
// change while a broker runs (clients take the finalized set with the
// highest epoch they have seen).
const featuresEpoch = 1
