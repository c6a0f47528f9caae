package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// AlterConfigs (key 33). Supported: v0-2.
//
// Semantics: replaces the whole set of dynamic configs of a TOPIC or
// BROKER resource (names left out return to their defaults), as Kafka's
// legacy AlterConfigs does. Unknown or read-only names, bad values and
// names or values longer than config.value.max.bytes get INVALID_CONFIG, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, a bad broker
// name INVALID_REQUEST. validate_only stops after the checks.
// Version notes: v2+ flexible.
// Roles: every broker (forwarded to the metastore).
func init() { register(33, handleAlterConfigs) }

func handleAlterConfigs(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if rerr := s.alterConfigsResource(rc, rr, req.ValidateOnly); rerr != nil {
			sr.ErrorCode, sr.ErrorMessage = rerr.code, kmsg.StringPtr(rerr.msg)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (s *Server) alterConfigsResource(rc *reqCtx, rr kmsg.AlterConfigsRequestResource, validateOnly bool) *resourceError {
	if rerr := s.configAuthorized(rc, rr.ResourceType, rr.ResourceName, acl.OpAlterConfigs); rerr != nil {
		return rerr
	}
	cur, rerr := s.currentDynamic(rr.ResourceType, rr.ResourceName)
	if rerr != nil {
		return rerr
	}
	set := make(map[string]string)
	for _, c := range rr.Configs {
		if msg := s.configEntryError(c.Name, c.Value); msg != "" {
			return resErr(kerr.InvalidConfig.Code, "%s", msg)
		}
		if c.Value != nil {
			set[c.Name] = *c.Value
		}
	}
	var del []string
	for k := range cur {
		if _, keep := set[k]; !keep {
			del = append(del, k)
		}
	}
	ch, rerr := s.validateChange(rr.ResourceType, rr.ResourceName, set, del)
	if rerr != nil || validateOnly {
		return rerr
	}
	return s.applyChange(rc.ctx(), ch)
}
