package server

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/configs"
)

// IncrementalAlterConfigs (key 44). Supported: v0-1.
//
// Semantics: per config, SET (0) a value, DELETE (1) it back to its
// default, APPEND (2) to or SUBTRACT (3) from a list config; APPEND and
// SUBTRACT on a non-list config, a name given twice, unknown or read-only
// names, bad values and names or values (also a list after APPEND)
// longer than config.value.max.bytes get INVALID_CONFIG (INVALID_REQUEST
// for a repeated name, as Kafka). validate_only stops after the checks.
// Version notes: v1+ flexible.
// Roles: every broker (forwarded to the metastore).
func init() { register(44, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if rerr := s.incrementalAlter(rc, rr, req.ValidateOnly); rerr != nil {
			sr.ErrorCode, sr.ErrorMessage = rerr.code, kmsg.StringPtr(rerr.msg)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (s *Server) incrementalAlter(rc *reqCtx, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) *resourceError {
	if rerr := s.configAuthorized(rc, rr.ResourceType, rr.ResourceName, acl.OpAlterConfigs); rerr != nil {
		return rerr
	}
	cur, rerr := s.currentDynamic(rr.ResourceType, rr.ResourceName)
	if rerr != nil {
		return rerr
	}
	set := make(map[string]string)
	var del []string
	seen := make(map[string]bool)
	for _, c := range rr.Configs {
		// Before anything is split or echoed: an APPEND of a huge list
		// would otherwise cost quadratic time.
		if msg := s.configEntryError(c.Name, c.Value); msg != "" {
			return resErr(kerr.InvalidConfig.Code, "%s", msg)
		}
		if seen[c.Name] {
			return resErr(kerr.InvalidRequest.Code, "config %s is given more than once", c.Name)
		}
		seen[c.Name] = true
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if c.Value == nil {
				return resErr(kerr.InvalidRequest.Code, "null value for config %s", c.Name)
			}
			set[c.Name] = *c.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			del = append(del, c.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if !s.isListConfig(rr.ResourceType, c.Name) {
				return resErr(kerr.InvalidConfig.Code, "config %s is not a list, so it cannot be appended to or subtracted from", c.Name)
			}
			list := s.currentList(rr, cur, c.Name)
			var items []string
			if c.Value != nil {
				items = strings.Split(*c.Value, ",")
			}
			for _, it := range items {
				it = strings.TrimSpace(it)
				i := slices.Index(list, it)
				if c.Op == kmsg.IncrementalAlterConfigOpAppend && i < 0 {
					list = append(list, it)
				} else if c.Op == kmsg.IncrementalAlterConfigOpSubtract && i >= 0 {
					list = slices.Delete(list, i, i+1)
				}
			}
			set[c.Name] = strings.Join(list, ",")
			if msg := s.configEntryError(c.Name, kmsg.StringPtr(set[c.Name])); msg != "" {
				return resErr(kerr.InvalidConfig.Code, "%s", msg)
			}
		default:
			return resErr(kerr.InvalidRequest.Code, "unknown operation %d for config %s", c.Op, c.Name)
		}
	}
	ch, rerr := s.validateChange(rr.ResourceType, rr.ResourceName, set, del)
	if rerr != nil || validateOnly {
		return rerr
	}
	return s.applyChange(rc.ctx(), ch)
}

func (s *Server) isListConfig(resType kmsg.ConfigResourceType, name string) bool {
	if resType == kmsg.ConfigResourceTypeTopic {
		def, ok := configs.LookupTopicConfig(name)
		return ok && def.Type == configs.TypeList
	}
	for _, bc := range configs.BrokerConfigs(s.cfg.Config) {
		if bc.Name == name {
			return bc.Type == configs.TypeList
		}
	}
	return false
}

// currentList is the effective value of a list config, split.
func (s *Server) currentList(rr kmsg.IncrementalAlterConfigsRequestResource, cur map[string]string, name string) []string {
	v, ok := cur[name]
	if !ok && rr.ResourceType == kmsg.ConfigResourceTypeTopic {
		if t, found := s.catalog.TopicByName(rr.ResourceName); found {
			cv, _ := s.topicConfig(t, name)
			v = cv.value
		}
	}
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
