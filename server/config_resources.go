package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/configs"
)

// Shared by DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: the
// three resource types Sluice has configs for (topics, brokers, groups),
// and how changes are checked and stored.

// resourceError is a per-resource failure with its Kafka code.
type resourceError struct {
	code int16
	msg  string
}

func (e *resourceError) Error() string { return e.msg }

func resErr(code int16, format string, args ...any) *resourceError {
	return &resourceError{code: code, msg: fmt.Sprintf(format, args...)}
}

// configAuthorized checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a
// config resource as Kafka does: on the topic for TOPIC
// (TOPIC_AUTHORIZATION_FAILED), on the cluster for BROKER and BROKER_LOGGER
// (CLUSTER_AUTHORIZATION_FAILED).
func (s *Server) configAuthorized(rc *reqCtx, rt kmsg.ConfigResourceType, name string, op acl.Operation) *resourceError {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if !s.authorizeTopic(rc, op, name) {
			return resErr(kerr.TopicAuthorizationFailed.Code, "%s on topic %s is required", op, name)
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !s.authorizeCluster(rc, op) {
			return resErr(kerr.ClusterAuthorizationFailed.Code, "%s on the cluster is required", op)
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !s.authorizeGroup(rc, op, name) {
			return resErr(kerr.GroupAuthorizationFailed.Code, "%s on group %s is required", op, name)
		}
	}
	return nil
}

// groupConfigDefs are the GROUP configs Sluice honours (Kafka's
// GroupConfig names), with the broker setting each defaults to.
func (s *Server) groupConfigDefs() []describedConfig {
	c := s.cfg.Config
	return []describedConfig{
		{name: "share.auto.offset.reset", value: configValue{"latest", sourceDefault}, typ: configs.TypeString,
			doc: "Where a share group starts reading a partition it never read: latest or earliest."},
		{name: "share.record.lock.duration.ms", value: configValue{strconv.Itoa(int(c.GroupShareRecordLockDurationMs)), sourceDefault}, typ: configs.TypeInt,
			doc: "How long a record a member of this share group acquired stays locked to it."},
	}
}

// Kafka's bounds for a group's share.record.lock.duration.ms: its
// group.share.min/max.record.lock.duration.ms defaults.
const (
	groupShareMinLockMs = 15000
	groupShareMaxLockMs = 60000
)

func validateGroupConfig(k string, v *string) *resourceError {
	switch k {
	case "share.auto.offset.reset":
		if v != nil && *v != "latest" && *v != "earliest" {
			return resErr(kerr.InvalidConfig.Code, "share.auto.offset.reset must be latest or earliest")
		}
	case "share.record.lock.duration.ms":
		if v == nil {
			return nil
		}
		n, err := strconv.ParseInt(*v, 10, 32)
		if err != nil || n < groupShareMinLockMs || n > groupShareMaxLockMs {
			return resErr(kerr.InvalidConfig.Code, "share.record.lock.duration.ms must be between %d and %d", groupShareMinLockMs, groupShareMaxLockMs)
		}
	default:
		return resErr(kerr.InvalidConfig.Code, "unknown or unsupported group config %s", k)
	}
	return nil
}

func (s *Server) describeGroupConfigs(name string) ([]describedConfig, *resourceError) {
	if name == "" {
		return nil, resErr(kerr.InvalidRequest.Code, "empty group id")
	}
	set := s.catalog.GroupConfigs(name)
	out := s.groupConfigDefs()
	for i := range out {
		if v, ok := set[out[i].name]; ok {
			out[i].value = configValue{v, sourceDynamicGroup}
		}
	}
	return out, nil
}

// brokerResource resolves a BROKER resource name: "" is the cluster-wide
// default (-1), otherwise a registered broker's id.
func (s *Server) brokerResource(name string) (int32, *resourceError) {
	if name == "" {
		return -1, nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return 0, resErr(kerr.InvalidRequest.Code, "broker resource name %q is not a broker id", name)
	}
	for _, b := range s.catalog.Brokers() {
		if b.ID == int32(id) {
			return int32(id), nil
		}
	}
	if int32(id) == s.cfg.NodeID {
		return int32(id), nil
	}
	return 0, resErr(kerr.InvalidRequest.Code, "unknown broker id %d", id)
}

// describedConfig is one row of a DescribeConfigs answer.
type describedConfig struct {
	name      string
	value     configValue
	readOnly  bool
	synonyms  []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	typ       configs.ConfigType
	doc       string
	sensitive bool
}

func (s *Server) describeTopicConfigs(name string, withSynonyms bool) ([]describedConfig, *resourceError) {
	t, ok := s.catalog.TopicByName(name)
	if !ok {
		return nil, resErr(kerr.UnknownTopicOrPartition.Code, "topic %s does not exist", name)
	}
	var out []describedConfig
	for _, n := range configs.TopicConfigNames() {
		def, _ := configs.LookupTopicConfig(n)
		v, _ := s.topicConfig(t, n)
		dc := describedConfig{name: n, value: v, typ: def.Type, doc: def.Doc}
		if withSynonyms {
			if tv, ok := t.Configs[n]; ok {
				dc.synonyms = append(dc.synonyms, synonym(n, tv, sourceDynamicTopic))
			}
			dc.synonyms = append(dc.synonyms, s.brokerSynonyms(def.BrokerSynonym)...)
		}
		out = append(out, dc)
	}
	return out, nil
}

// brokerSynonyms lists every level that sets a broker config, most
// specific first, as Kafka's synonyms do.
func (s *Server) brokerSynonyms(name string) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	if v, ok := s.catalog.BrokerConfigs(s.cfg.NodeID)[name]; ok {
		out = append(out, synonym(name, v, sourceDynamicBroker))
	}
	if v, ok := s.catalog.BrokerConfigs(-1)[name]; ok {
		out = append(out, synonym(name, v, sourceDynamicDefaultBroker))
	}
	for _, bc := range configs.BrokerConfigs(s.cfg.Config) {
		if bc.Name == name {
			if bc.Value != bc.Default {
				out = append(out, synonym(name, bc.Value, sourceStaticBroker))
			}
			out = append(out, synonym(name, bc.Default, sourceDefault))
		}
	}
	return out
}

func synonym(name, value string, source int8) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	syn.Name, syn.Value, syn.Source = name, kmsg.StringPtr(value), kmsg.ConfigSource(source)
	return syn
}

func (s *Server) describeBrokerConfigs(name string, withSynonyms bool) ([]describedConfig, *resourceError) {
	id, rerr := s.brokerResource(name)
	if rerr != nil {
		return nil, rerr
	}
	var out []describedConfig
	for _, bc := range configs.BrokerConfigs(s.cfg.Config) {
		dc := describedConfig{name: bc.Name, readOnly: !bc.Dynamic, typ: bc.Type, doc: bc.Doc}
		if id == -1 {
			// The cluster-wide resource shows only its dynamic defaults.
			v, ok := s.catalog.BrokerConfigs(-1)[bc.Name]
			if !ok {
				continue
			}
			dc.value = configValue{v, sourceDynamicDefaultBroker}
		} else {
			syns := s.brokerSynonyms(bc.Name)
			if id != s.cfg.NodeID {
				// Another broker's own dynamic value is in the
				// metastore; its static file is not visible here.
				if v, ok := s.catalog.BrokerConfigs(id)[bc.Name]; ok {
					syns = append([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{synonym(bc.Name, v, sourceDynamicBroker)}, syns[1:]...)
				}
			}
			if len(syns) == 0 {
				continue
			}
			dc.value = configValue{*syns[0].Value, int8(syns[0].Source)}
			if withSynonyms {
				dc.synonyms = syns
			}
		}
		out = append(out, dc)
	}
	return out, nil
}

// configChange is a validated change to one resource.
type configChange struct {
	topic  string // set for TOPIC resources
	group  string // set for GROUP resources
	broker int32  // for BROKER resources
	set    map[string]string
	del    []string
}

// current returns the resource's dynamic configs as stored now.
func (s *Server) currentDynamic(resType kmsg.ConfigResourceType, name string) (map[string]string, *resourceError) {
	switch resType {
	case kmsg.ConfigResourceTypeTopic:
		t, ok := s.catalog.TopicByName(name)
		if !ok {
			return nil, resErr(kerr.UnknownTopicOrPartition.Code, "topic %s does not exist", name)
		}
		return t.Configs, nil
	case kmsg.ConfigResourceTypeBroker:
		id, rerr := s.brokerResource(name)
		if rerr != nil {
			return nil, rerr
		}
		return s.catalog.BrokerConfigs(id), nil
	case kmsg.ConfigResourceTypeGroupConfig:
		if name == "" {
			return nil, resErr(kerr.InvalidRequest.Code, "empty group id")
		}
		return s.catalog.GroupConfigs(name), nil
	}
	return nil, resErr(kerr.InvalidRequest.Code, "configs of resource type %d are not supported", resType)
}

// validateChange checks every value set on the resource.
func (s *Server) validateChange(resType kmsg.ConfigResourceType, name string, set map[string]string, del []string) (configChange, *resourceError) {
	ch := configChange{set: set, del: del}
	switch resType {
	case kmsg.ConfigResourceTypeTopic:
		ch.topic = name
		for _, k := range del {
			if _, ok := configs.LookupTopicConfig(k); !ok {
				return ch, resErr(kerr.InvalidConfig.Code, "unknown or unsupported topic config %s", k)
			}
		}
		if err := configs.ValidateTopicConfigs(set); err != nil {
			return ch, resErr(kerr.InvalidConfig.Code, "%v", err)
		}
		if rerr := s.checkModeChange(name, set, del); rerr != nil {
			return ch, rerr
		}
	case kmsg.ConfigResourceTypeBroker:
		id, rerr := s.brokerResource(name)
		if rerr != nil {
			return ch, rerr
		}
		ch.broker = id
		for _, k := range slices.Sorted(maps.Keys(set)) {
			v := set[k]
			if id != -1 && configs.ClusterWideOnly(k) {
				// The metastore applies it to every topic without
				// its own value, so one broker cannot differ.
				return ch, resErr(kerr.InvalidConfig.Code, "broker config %s can only be set cluster-wide (the default broker resource)", k)
			}
			if err := configs.ValidateDynamicBrokerConfig(s.cfg.Config, k, &v); err != nil {
				return ch, resErr(kerr.InvalidConfig.Code, "%v", err)
			}
		}
		for _, k := range del {
			if err := configs.ValidateDynamicBrokerConfig(s.cfg.Config, k, nil); err != nil {
				return ch, resErr(kerr.InvalidConfig.Code, "%v", err)
			}
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		ch.group = name
		for _, k := range slices.Sorted(maps.Keys(set)) {
			v := set[k]
			if rerr := validateGroupConfig(k, &v); rerr != nil {
				return ch, rerr
			}
		}
		for _, k := range del {
			if rerr := validateGroupConfig(k, nil); rerr != nil {
				return ch, rerr
			}
		}
	default:
		return ch, resErr(kerr.InvalidRequest.Code, "configs of resource type %d are not supported", resType)
	}
	return ch, nil
}

// applyChange stores a validated change and applies it to open partitions.
func (s *Server) applyChange(ctx context.Context, ch configChange) *resourceError {
	var err error
	if ch.topic != "" {
		err = s.catalog.AlterTopicConfigs(ctx, ch.topic, ch.set, ch.del)
	} else if ch.group != "" {
		err = s.catalog.AlterGroupConfigs(ctx, ch.group, ch.set, ch.del)
	} else {
		err = s.catalog.AlterBrokerConfigs(ctx, ch.broker, ch.set, ch.del)
	}
	if err != nil {
		return resErr(errorCode(err), "%v", err)
	}
	s.refreshPartitions()
	return nil
}

// checkModeChange refuses a change of a topic's replication.mode into or
// out of shared: a shared partition's data is in shared storage and a
// raft partition's in its replicas' logs, and nothing moves one into the
// other. Setting shared on a broker without shared storage is refused too.
func (s *Server) checkModeChange(topic string, set map[string]string, del []string) *resourceError {
	v, setting := set["replication.mode"]
	if !setting && !slices.Contains(del, "replication.mode") {
		return nil
	}
	if err := s.cfg.CheckReplicationMode(v); err != nil {
		return resErr(kerr.InvalidConfig.Code, "%v", err)
	}
	t, ok := s.catalog.TopicByName(topic)
	if !ok {
		return nil // answered UNKNOWN_TOPIC_OR_PARTITION when applied
	}
	cur, _ := s.topicConfig(t, "replication.mode")
	next := v
	if !setting {
		d, _ := configs.LookupTopicConfig("replication.mode")
		next = s.brokerTopicDefault(d).value
	}
	if strings.EqualFold(cur.value, "shared") != strings.EqualFold(next, "shared") {
		return resErr(kerr.InvalidConfig.Code, "replication.mode of topic %s cannot change from %s to %s: shared or not is chosen when a topic is created", topic, cur.value, next)
	}
	return nil
}
