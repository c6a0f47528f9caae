package server

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
)

// CreateTopics (key 19). Supported: v0-7.
//
// Semantics: each topic is checked like Kafka checks it: a valid name
// (INVALID_TOPIC_EXCEPTION), a name given once per request
// (INVALID_REQUEST), partitions and replication factor positive or -1 for
// the broker default (INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, the
// latter also when there are fewer write brokers than replicas), an
// explicit assignment only without counts and naming known brokers
// (INVALID_REQUEST, INVALID_REPLICA_ASSIGNMENT), configs Sluice knows with
// valid values (INVALID_CONFIG, also for a name or value longer than
// config.value.max.bytes), and a free name (TOPIC_ALREADY_EXISTS, read
// after a barrier that makes this broker's cache current; REQUEST_TIMED_OUT
// when the metastore cannot be reached for it: catalogSync). A
// request adding more than max.partitions.per.request partitions in all
// fails whole, and a topic that would take the cluster past
// max.partitions fails, with POLICY_VIOLATION (admin_limits.go).
// validate_only stops after the checks. The topic is stored in the
// metastore; the answer waits, at most half the request's timeout, for
// the partitions hosted here to open and for every partition's first
// election to be published (refreshPartitionsWithin), so the leader epoch
// a client reads next is not the placeholder 0 the election replaces.
// Version notes: v1 validate_only and error messages; v4 -1 defaults;
// v5+ flexible, configs and counts in the response; v7 topic id.
// Roles: every broker (forwarded to the metastore).
func init() { register(19, handleCreateTopics) }

func handleCreateTopics(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	s.awaitOwnRegistration(rc.ctx(), 5*time.Second)

	seen := make(map[string]int)
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	// As Kafka's controller does, a request adding too many partitions
	// in all fails whole, before any topic is looked at.
	var reqCode int16
	var reqMsg string
	if n := s.createTopicsPartitions(req); n > int64(s.cfg.MaxPartitionsPerRequest) {
		reqCode, reqMsg = s.tooManyPerRequest(n)
	}
	var clusterPartitions int64
	if reqCode == 0 {
		clusterPartitions = s.clusterPartitions()
	}
	// Authorization, as Kafka: CREATE on the cluster, or else on each
	// topic (TOPIC_AUTHORIZATION_FAILED); the configs in the answer need
	// DESCRIBE_CONFIGS on the topic (TopicConfigErrorCode otherwise).
	clusterCreate := s.authorizeCluster(rc, acl.OpCreate)
	var created []string
	synced := s.catalogSync(rc, req.TimeoutMillis)
	// controller_mutation_rate: strict (THROTTLING_QUOTA_EXCEEDED) from v6.
	mq := s.quotas.mutations(rc, req.Version >= 6)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			if req.Version >= 1 {
				st.ErrorMessage = kmsg.StringPtr(msg)
			}
		}
		if reqCode != 0 {
			fail(reqCode, reqMsg)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if seen[rt.Topic] > 1 {
			fail(kerr.InvalidRequest.Code, fmt.Sprintf("topic %s is listed more than once in the request", rt.Topic))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !clusterCreate && !s.authorizeTopic(rc, acl.OpCreate, rt.Topic) {
			fail(kerr.TopicAuthorizationFailed.Code, "Authorization failed.")
			resp.Topics = append(resp.Topics, st)
			continue
		}
		spec, code, msg := s.topicSpec(rt)
		if code != 0 {
			fail(code, msg)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if coordinator.IsInternalTopic(rt.Topic) {
			// __consumer_offsets always exists: the group coordinator
			// serves it (offsets_topic.go); __transaction_state is
			// reserved for a transaction coordinator.
			if rt.Topic == coordinator.OffsetsTopic {
				fail(kerr.TopicAlreadyExists.Code, fmt.Sprintf("topic '%s' already exists: it is Kafka's internal topic, served read-only by the group coordinator", rt.Topic))
			} else {
				fail(kerr.InvalidRequest.Code, fmt.Sprintf("topic '%s' is reserved for Kafka's internal use", rt.Topic))
			}
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if err := synced(); err != nil {
			fail(kerr.RequestTimedOut.Code, catalogSyncMessage)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if _, exists := s.catalog.TopicByName(rt.Topic); exists {
			fail(kerr.TopicAlreadyExists.Code, fmt.Sprintf("topic '%s' already exists", rt.Topic))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if code, msg := s.checkClusterPartitions(clusterPartitions, int64(spec.Partitions)); code != 0 {
			fail(code, msg)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		t := metastore.Topic{Name: spec.Name, Configs: spec.Configs, Partitions: make([]metastore.Partition, spec.Partitions)}
		if !req.ValidateOnly && !mq.spend(int(spec.Partitions)) {
			fail(kerr.ThrottlingQuotaExceeded.Code, throttlingMessage)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !req.ValidateOnly {
			var err error
			t, err = s.catalog.CreateTopic(rc.ctx(), spec)
			if err != nil {
				fail(errorCode(err), err.Error())
				resp.Topics = append(resp.Topics, st)
				continue
			}
			created = append(created, t.Name)
			clusterPartitions += int64(spec.Partitions)
			s.log.Info().Str("topic", t.Name).Int("partitions", len(t.Partitions)).Msg("created topic")
		}
		st.TopicID = t.ID
		st.NumPartitions = spec.Partitions
		st.ReplicationFactor = spec.ReplicationFactor
		if req.Version >= 5 && !s.authorizeTopic(rc, acl.OpDescribeConfigs, rt.Topic) {
			st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
		} else if req.Version >= 5 {
			for _, name := range configs.TopicConfigNames() {
				v, _ := s.topicConfig(t, name)
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name, c.Value, c.Source = name, kmsg.StringPtr(v.value), v.source
				st.Configs = append(st.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(created) > 0 {
		s.refreshPartitionsWithin(req.TimeoutMillis, created)
	}
	return resp, nil
}

// topicSpec turns a CreateTopics entry into a spec, or the error to report.
func (s *Server) topicSpec(rt kmsg.CreateTopicsRequestTopic) (metastore.TopicSpec, int16, string) {
	spec := metastore.TopicSpec{Name: rt.Topic, Partitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor}
	if err := validTopicName(rt.Topic); err != nil {
		return spec, kerr.InvalidTopicException.Code, err.Error()
	}
	for _, c := range rt.Configs {
		if msg := s.configEntryError(c.Name, c.Value); msg != "" {
			return spec, kerr.InvalidConfig.Code, msg
		}
	}
	writers := make(map[int32]bool)
	for _, b := range s.catalog.Brokers() {
		if b.Role == metastore.RoleWrite || b.Role == metastore.RoleCombined {
			writers[b.ID] = true
		}
	}
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return spec, kerr.InvalidRequest.Code, "both a replica assignment and a partition count or replication factor were given"
		}
		spec.Partitions = int32(len(rt.ReplicaAssignment))
		spec.Assignment = make([][]int32, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(rt.ReplicaAssignment) || spec.Assignment[a.Partition] != nil {
				return spec, kerr.InvalidReplicaAssignment.Code, "partitions in the assignment must be consecutive from 0, each given once"
			}
			if msg := s.checkReplicaList(a.Replicas); msg != "" {
				return spec, kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("partition %d: %s", a.Partition, msg)
			}
			if spec.ReplicationFactor == -1 {
				spec.ReplicationFactor = int16(len(a.Replicas))
			} else if int(spec.ReplicationFactor) != len(a.Replicas) {
				return spec, kerr.InvalidReplicaAssignment.Code, "every partition must have the same number of replicas"
			}
			spec.Assignment[a.Partition] = a.Replicas
		}
	}
	if spec.Partitions == -1 {
		spec.Partitions = s.cfg.NumPartitions
	}
	if spec.ReplicationFactor == -1 {
		spec.ReplicationFactor = s.cfg.DefaultReplicationFactor
	}
	if spec.Partitions <= 0 {
		return spec, kerr.InvalidPartitions.Code, "number of partitions must be larger than 0"
	}
	if spec.ReplicationFactor <= 0 {
		return spec, kerr.InvalidReplicationFactor.Code, "replication factor must be larger than 0"
	}
	if int(spec.ReplicationFactor) > len(writers) {
		return spec, kerr.InvalidReplicationFactor.Code,
			fmt.Sprintf("replication factor: %d larger than available brokers: %d", spec.ReplicationFactor, len(writers))
	}
	if len(rt.Configs) > 0 {
		spec.Configs = make(map[string]string, len(rt.Configs))
		for _, c := range rt.Configs {
			if c.Value == nil {
				continue // a null value means "use the default"
			}
			spec.Configs[c.Name] = *c.Value
		}
		if err := configs.ValidateTopicConfigs(spec.Configs); err != nil {
			return spec, kerr.InvalidConfig.Code, err.Error()
		}
	}
	if err := s.pinSharedMode(&spec); err != nil {
		return spec, kerr.InvalidConfig.Code, err.Error()
	}
	return spec, 0, ""
}

// awaitOwnRegistration waits, at most max, until this broker's own
// registration is in its view of the metastore. Metadata lists a broker
// from the moment its listener is up (views.go), so a client may ask it
// to create a topic before the broker registered, or before the
// registration reached its view; the topic's replicas are counted among
// the registered brokers, and the request would fail with
// INVALID_REPLICATION_FACTOR on a broker that is about to count itself.
func (s *Server) awaitOwnRegistration(ctx context.Context, max time.Duration) {
	if !s.cfg.HasRole("write") {
		return
	}
	for deadline := time.Now().Add(max); ; {
		for _, b := range s.catalog.Brokers() {
			if b.ID == s.cfg.NodeID {
				return
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
