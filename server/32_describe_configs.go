package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// DescribeConfigs (key 32). Supported: v0-4.
//
// Semantics: TOPIC resources list every topic config Sluice honours with
// its effective value and source (topic, broker, cluster default, static,
// default); BROKER resources list this broker's configs, or with an empty
// name the cluster-wide dynamic defaults; GROUP resources (type 32) the
// group configs Sluice honours (share.auto.offset.reset,
// share.record.lock.duration.ms), source GROUP_CONFIG when set. ConfigNames
// filters; synonyms
// (v1+) list every level that sets a value, most specific first.
// Version notes: v1 synonyms and sources; v3 types and documentation;
// v4+ flexible.
// Roles: every broker.
func init() { register(32, handleDescribeConfigs) }

func handleDescribeConfigs(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var rows []describedConfig
		var rerr *resourceError
		withSyn := req.Version >= 1 && req.IncludeSynonyms
		switch rerr = s.configAuthorized(rc, rr.ResourceType, rr.ResourceName, acl.OpDescribeConfigs); {
		case rerr != nil:
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			rows, rerr = s.describeTopicConfigs(rr.ResourceName, withSyn)
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			rows, rerr = s.describeBrokerConfigs(rr.ResourceName, withSyn)
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			rows, rerr = s.describeGroupConfigs(rr.ResourceName)
		default:
			rerr = resErr(kerr.InvalidRequest.Code, "configs of resource type %d are not supported", rr.ResourceType)
		}
		if rerr != nil {
			sr.ErrorCode, sr.ErrorMessage = rerr.code, kmsg.StringPtr(rerr.msg)
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		want := make(map[string]bool, len(rr.ConfigNames))
		for _, n := range rr.ConfigNames {
			want[n] = true
		}
		for _, row := range rows {
			if rr.ConfigNames != nil && !want[row.name] {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name = row.name
			c.Value = kmsg.StringPtr(row.value.value)
			c.ReadOnly = row.readOnly
			c.IsDefault = row.value.source == sourceDefault
			c.Source = kmsg.ConfigSource(row.value.source)
			c.IsSensitive = row.sensitive
			c.ConfigSynonyms = row.synonyms
			c.ConfigType = kmsg.ConfigType(row.typ)
			if req.IncludeDocumentation && row.doc != "" {
				c.Documentation = kmsg.StringPtr(row.doc)
			}
			sr.Configs = append(sr.Configs, c)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}
