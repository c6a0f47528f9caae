package server

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/protocol"
)

// authzCase is one advertised API in TestAuthorizationEveryAPI: a minimal
// valid request, and what a principal without ACLs gets for it.
type authzCase struct {
	req func() kmsg.Request
	// codes picks the error codes that carry the refusal from the
	// response; every one must be want (-1: an entry Kafka's error
	// response has is missing).
	codes func(kmsg.Response) []int16
	want  *kerr.Error
	// visible, for an API that filters instead of refusing (a listing),
	// counts what the response shows of the resources set up for the
	// test: 0 without ACLs, and more than 0 once grant is in place.
	visible func(kmsg.Response) int
	// unchecked says why an API asks the authorizer nothing (the SASL
	// exchange, ApiVersions); it must still be answered without an
	// authorization error.
	unchecked string
	// version, if not 0, is the version sent instead of the newest.
	version int16
	// grant, if any, are the ACLs under which the same request is served:
	// none of its codes is then an authorization error.
	grant []acl.Binding
}

var authzCodes = []*kerr.Error{kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed,
	kerr.ClusterAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed}

// TestAuthorizationEveryAPI sends every advertised API, at its newest
// advertised version, as User:ANONYMOUS (a PLAINTEXT connection) to a
// single node with the authorizer on and no ACLs, and checks Kafka's error
// code for the refusal (KafkaApis, AclApis): TOPIC_, GROUP_, CLUSTER_ or
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED where Kafka refuses, nothing shown
// where Kafka filters. A key advertised without a case here fails the
// test. The APIs that name a group and a topic are also checked with the
// group allowed and the topic not. Then the data-path and group APIs are
// sent again under the ACLs that allow them: the data path (Produce, Fetch,
// ListOffsets, Metadata, the offsets, FindCoordinator, InitProducerId,
// ...) answers without any error, the others without an authorization
// error, and the listings show what they hid.
func TestAuthorizationEveryAPI(t *testing.T) {
	b := startBrokerWith(t, func(c *configs.Config) {
		c.AuthorizerEnable = true
		c.AutoCreateTopics = false
	}, func(o *Options, meta *metastore.Node) {
		g, err := coordinator.New(coordinator.Config{BrokerID: o.Config.NodeID, Store: meta.Client(), Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		o.Groups = g
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mc := b.meta.Client()
	topic, err := mc.CreateTopic(ctx, metastore.TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	tid := [16]byte(topic.ID)
	// A group with committed offsets and a transaction, for the listings
	// to leave out.
	if err := mc.CommitOffsets(ctx, metastore.Fence{}, "g", []metastore.OffsetCommit{
		{TopicPartition: metastore.TopicPartition{Topic: "t", Partition: 0}, Offset: 0, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.PutTxn(ctx, metastore.TxnState{TransactionalID: "tx", ProducerID: 1 << 40, LastProducerID: -1, LastEpoch: -1,
		TimeoutMs: 60_000, Status: metastore.TxnEmpty}, 0, metastore.TxnKeepOffsets); err != nil {
		t.Fatal(err)
	}

	allow := func(rt acl.ResourceType, name string, op acl.Operation) acl.Binding {
		return anonymousACL(rt, name, acl.PatternLiteral, op, acl.Allow)
	}
	one := func(c int16) []int16 { return []int16{c} }
	cases := map[int16]authzCase{
		0: { // Produce: WRITE on the topic
			req: func() kmsg.Request {
				r := kmsg.NewPtrProduceRequest()
				r.Acks, r.TimeoutMillis = -1, 5000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic, rt.TopicID = "t", tid
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = makeTestBatch(1, 1)
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
			},
			want:  kerr.TopicAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceTopic, "t", acl.OpWrite)},
		},
		1: { // Fetch (a consumer): READ on the topic
			req: func() kmsg.Request {
				r := kmsg.NewPtrFetchRequest()
				r.ReplicaID, r.MaxBytes, r.SessionEpoch = -1, 1<<20, -1
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = "t", tid
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = -1, -1, -1, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode)
			},
			want:  kerr.TopicAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceTopic, "t", acl.OpRead)},
		},
		2: { // ListOffsets: DESCRIBE on the topic
			req: func() kmsg.Request {
				r := kmsg.NewPtrListOffsetsRequest()
				r.ReplicaID = -1
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp = -1
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode)
			},
			want:  kerr.TopicAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceTopic, "t", acl.OpDescribe)},
		},
		3: { // Metadata of a named topic: DESCRIBE on it
			req: func() kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr("t")
				r.Topics = append(r.Topics, mt)
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.MetadataResponse).Topics[0].ErrorCode) },
			want:  kerr.TopicAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceTopic, "t", acl.OpDescribe)},
		},
		8: { // OffsetCommit: READ on the group first
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetCommitRequest()
				r.Group, r.Generation = "g", -1
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic, rt.TopicID = "t", tid
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Offset, rp.LeaderEpoch = 1, -1
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
			},
			want:  kerr.GroupAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceGroup, "g", acl.OpRead), allow(acl.ResourceTopic, "t", acl.OpRead)},
		},
		9: { // OffsetFetch: DESCRIBE on the group
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetFetchRequest()
				g := kmsg.NewOffsetFetchRequestGroup()
				g.Group = "g"
				r.Groups = append(r.Groups, g)
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceGroup, "g", acl.OpDescribe)},
		},
		10: { // FindCoordinator of a group: DESCRIBE on it
			req: func() kmsg.Request {
				r := kmsg.NewPtrFindCoordinatorRequest()
				r.CoordinatorKeys = []string{"g"}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode)
			},
			want:  kerr.GroupAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceGroup, "g", acl.OpDescribe)},
		},
		11: { // JoinGroup: READ on the group
			req: func() kmsg.Request {
				r := kmsg.NewPtrJoinGroupRequest()
				r.Group, r.ProtocolType, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
				r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: "range"})
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.JoinGroupResponse).ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceGroup, "g", acl.OpRead)},
		},
		12: { // Heartbeat: READ on the group
			req: func() kmsg.Request {
				r := kmsg.NewPtrHeartbeatRequest()
				r.Group, r.MemberID, r.Generation = "g", "m", 1
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.HeartbeatResponse).ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceGroup, "g", acl.OpRead)},
		},
		13: { // LeaveGroup: READ on the group
			req: func() kmsg.Request {
				r := kmsg.NewPtrLeaveGroupRequest()
				r.Group = "g"
				r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.LeaveGroupResponse).ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceGroup, "g", acl.OpRead)},
		},
		14: { // SyncGroup: READ on the group
			req: func() kmsg.Request {
				r := kmsg.NewPtrSyncGroupRequest()
				r.Group, r.MemberID, r.Generation = "g", "m", 1
				r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.SyncGroupResponse).ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceGroup, "g", acl.OpRead)},
		},
		15: { // DescribeGroups: DESCRIBE on each group
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeGroupsRequest()
				r.Groups = []string{"g"}
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceGroup, "g", acl.OpDescribe)},
		},
		16: { // ListGroups: the groups the client may DESCRIBE
			req: func() kmsg.Request { return kmsg.NewPtrListGroupsRequest() },
			visible: func(r kmsg.Response) int {
				lr := r.(*kmsg.ListGroupsResponse)
				if lr.ErrorCode != 0 {
					return -1
				}
				return len(lr.Groups)
			},
			grant: []acl.Binding{allow(acl.ResourceGroup, "g", acl.OpDescribe)},
		},
		17: {
			req:       func() kmsg.Request { r := kmsg.NewPtrSASLHandshakeRequest(); r.Mechanism = "PLAIN"; return r },
			codes:     func(r kmsg.Response) []int16 { return one(r.(*kmsg.SASLHandshakeResponse).ErrorCode) },
			unchecked: "the SASL exchange comes before any principal",
		},
		18: {
			req:       func() kmsg.Request { return kmsg.NewPtrApiVersionsRequest() },
			codes:     func(r kmsg.Response) []int16 { return one(r.(*kmsg.ApiVersionsResponse).ErrorCode) },
			unchecked: "every client may ask what the broker serves",
		},
		19: { // CreateTopics: CREATE on the cluster or the topic
			req: func() kmsg.Request {
				r := kmsg.NewPtrCreateTopicsRequest()
				r.TimeoutMillis = 5000
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "new", 1, 1
				r.Topics = append(r.Topics, rt)
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode) },
			want:  kerr.TopicAuthorizationFailed,
		},
		20: { // DeleteTopics: DELETE on the topic
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteTopicsRequest()
				r.TimeoutMillis = 5000
				r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("t")}}
				r.TopicNames = []string{"t"}
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode) },
			want:  kerr.TopicAuthorizationFailed,
		},
		21: { // DeleteRecords: DELETE on the topic
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteRecordsRequest()
				r.TimeoutMillis = 5000
				r.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "t", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}}}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode)
			},
			want: kerr.TopicAuthorizationFailed,
		},
		22: { // InitProducerId, idempotent: IDEMPOTENT_WRITE on the cluster or WRITE on a topic
			req: func() kmsg.Request {
				r := kmsg.NewPtrInitProducerIDRequest()
				r.TransactionTimeoutMillis = -1
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.InitProducerIDResponse).ErrorCode) },
			want:  kerr.ClusterAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceTopic, "t", acl.OpWrite)},
		},
		23: { // OffsetForLeaderEpoch (a consumer): DESCRIBE on the topic
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetForLeaderEpochRequest()
				r.ReplicaID = -1
				rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode)
			},
			want:  kerr.TopicAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceTopic, "t", acl.OpDescribe)},
		},
		24: { // AddPartitionsToTxn v4+, the broker form: CLUSTER_ACTION
			req: func() kmsg.Request {
				r := kmsg.NewPtrAddPartitionsToTxnRequest()
				tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
				tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "tx", 1<<40, 0, true
				tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{0}}}
				r.Transactions = append(r.Transactions, tx)
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.AddPartitionsToTxnResponse).ErrorCode) },
			want:  kerr.ClusterAuthorizationFailed,
		},
		25: { // AddOffsetsToTxn: WRITE on the transactional id first
			req: func() kmsg.Request {
				r := kmsg.NewPtrAddOffsetsToTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = "tx", 1<<40, 0, "g"
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode) },
			want:  kerr.TransactionalIDAuthorizationFailed,
		},
		26: { // EndTxn: WRITE on the transactional id
			req: func() kmsg.Request {
				r := kmsg.NewPtrEndTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", 1<<40, 0
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.EndTxnResponse).ErrorCode) },
			want:  kerr.TransactionalIDAuthorizationFailed,
		},
		27: { // WriteTxnMarkers: CLUSTER_ACTION
			req: func() kmsg.Request {
				r := kmsg.NewPtrWriteTxnMarkersRequest()
				r.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1 << 40, ProducerEpoch: 0, Committed: true,
					Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "t", Partitions: []int32{0}}}}}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode)
			},
			want: kerr.ClusterAuthorizationFailed,
		},
		28: { // TxnOffsetCommit: WRITE on the transactional id first
			req: func() kmsg.Request {
				r := kmsg.NewPtrTxnOffsetCommitRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group, r.Generation = "tx", 1<<40, 0, "g", -1
				r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t",
					Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
			},
			want: kerr.TransactionalIDAuthorizationFailed,
		},
		29: { // DescribeAcls: DESCRIBE on the cluster
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeACLsRequest()
				r.ResourceType, r.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.DescribeACLsResponse).ErrorCode) },
			want:  kerr.ClusterAuthorizationFailed,
		},
		30: { // CreateAcls: ALTER on the cluster
			req: func() kmsg.Request {
				r := kmsg.NewPtrCreateACLsRequest()
				c := kmsg.NewCreateACLsRequestCreation()
				c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
				c.Principal, c.Host = acl.Anonymous, "*"
				c.Operation, c.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
				r.Creations = append(r.Creations, c)
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.CreateACLsResponse).Results[0].ErrorCode) },
			want:  kerr.ClusterAuthorizationFailed,
		},
		31: { // DeleteAcls: ALTER on the cluster
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteACLsRequest()
				f := kmsg.NewDeleteACLsRequestFilter()
				f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				r.Filters = append(r.Filters, f)
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.DeleteACLsResponse).Results[0].ErrorCode) },
			want:  kerr.ClusterAuthorizationFailed,
		},
		32: { // DescribeConfigs of a topic: DESCRIBE_CONFIGS on it
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeConfigsRequest()
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
				r.Resources = append(r.Resources, rr)
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode) },
			want:  kerr.TopicAuthorizationFailed,
		},
		33: { // AlterConfigs of a topic: ALTER_CONFIGS on it
			req: func() kmsg.Request {
				r := kmsg.NewPtrAlterConfigsRequest()
				rr := kmsg.NewAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
				rr.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("60000")}}
				r.Resources = append(r.Resources, rr)
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode) },
			want:  kerr.TopicAuthorizationFailed,
		},
		35: { // DescribeLogDirs: DESCRIBE on the cluster
			req:   func() kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() },
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.DescribeLogDirsResponse).ErrorCode) },
			want:  kerr.ClusterAuthorizationFailed,
		},
		36: {
			req: func() kmsg.Request {
				r := kmsg.NewPtrSASLAuthenticateRequest()
				r.SASLAuthBytes = []byte("\x00u\x00p")
				return r
			},
			codes:     func(r kmsg.Response) []int16 { return one(r.(*kmsg.SASLAuthenticateResponse).ErrorCode) },
			unchecked: "the SASL exchange comes before any principal",
		},
		37: { // CreatePartitions: ALTER on the topic
			req: func() kmsg.Request {
				r := kmsg.NewPtrCreatePartitionsRequest()
				r.TimeoutMillis = 5000
				r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "t", Count: 2}}
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode) },
			want:  kerr.TopicAuthorizationFailed,
		},
		42: { // DeleteGroups: DELETE on each group
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteGroupsRequest()
				r.Groups = []string{"g"}
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
		},
		43: { // ElectLeaders: ALTER on the cluster, at the top and per partition
			req: func() kmsg.Request {
				r := kmsg.NewPtrElectLeadersRequest()
				r.TimeoutMillis = 5000
				r.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				er := r.(*kmsg.ElectLeadersResponse)
				return []int16{er.ErrorCode, er.Topics[0].Partitions[0].ErrorCode}
			},
			want: kerr.ClusterAuthorizationFailed,
		},
		44: { // IncrementalAlterConfigs of a topic: ALTER_CONFIGS on it
			req: func() kmsg.Request {
				r := kmsg.NewPtrIncrementalAlterConfigsRequest()
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
				rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("60000")}}
				r.Resources = append(r.Resources, rr)
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode)
			},
			want: kerr.TopicAuthorizationFailed,
		},
		45: { // AlterPartitionReassignments: ALTER on the cluster
			req: func() kmsg.Request {
				r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
				r.TimeoutMillis = 5000
				r.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "t",
					Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: []int32{1}}}}}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				ar := r.(*kmsg.AlterPartitionAssignmentsResponse)
				if len(ar.Topics) != 1 || len(ar.Topics[0].Partitions) != 1 {
					return []int16{ar.ErrorCode, -1} // Kafka answers every partition named
				}
				return []int16{ar.ErrorCode, ar.Topics[0].Partitions[0].ErrorCode}
			},
			want: kerr.ClusterAuthorizationFailed,
		},
		46: { // ListPartitionReassignments: DESCRIBE on the cluster
			req: func() kmsg.Request {
				r := kmsg.NewPtrListPartitionReassignmentsRequest()
				r.TimeoutMillis = 5000
				r.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{{Topic: "t", Partitions: []int32{0}}}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				lr := r.(*kmsg.ListPartitionReassignmentsResponse)
				if len(lr.Topics) != 1 || len(lr.Topics[0].Partitions) != 1 || lr.Topics[0].Partitions[0].Partition != 0 {
					return []int16{lr.ErrorCode, -1} // Kafka echoes the partitions named
				}
				return one(lr.ErrorCode)
			},
			want: kerr.ClusterAuthorizationFailed,
		},
		47: { // OffsetDelete: DELETE on the group
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetDeleteRequest()
				r.Group = "g"
				r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.OffsetDeleteResponse).ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
		},
		48: { // DescribeClientQuotas: DESCRIBE_CONFIGS on the cluster
			req: func() kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() },
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.DescribeClientQuotasResponse).ErrorCode)
			},
			want: kerr.ClusterAuthorizationFailed,
		},
		49: { // AlterClientQuotas: ALTER_CONFIGS on the cluster
			req: func() kmsg.Request {
				r := kmsg.NewPtrAlterClientQuotasRequest()
				r.Entries = []kmsg.AlterClientQuotasRequestEntry{{
					Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("alice")}},
					Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1 << 20}}}}
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode) },
			want:  kerr.ClusterAuthorizationFailed,
		},
		50: { // DescribeUserScramCredentials: DESCRIBE on the cluster
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
				r.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "alice"}}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				dr := r.(*kmsg.DescribeUserSCRAMCredentialsResponse)
				if len(dr.Results) != 1 {
					return []int16{dr.ErrorCode, -1} // Kafka answers every user named
				}
				return []int16{dr.ErrorCode, dr.Results[0].ErrorCode}
			},
			want: kerr.ClusterAuthorizationFailed,
		},
		51: { // AlterUserScramCredentials: ALTER on the cluster
			req: func() kmsg.Request {
				r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
				r.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "alice", Mechanism: 1}}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode)
			},
			want: kerr.ClusterAuthorizationFailed,
		},
		60: { // DescribeCluster: no refusal; the authorized operations are none
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeClusterRequest()
				r.IncludeClusterAuthorizedOperations = true
				return r
			},
			visible: func(r kmsg.Response) int {
				dr := r.(*kmsg.DescribeClusterResponse)
				if dr.ErrorCode != 0 {
					return -1
				}
				return int(dr.ClusterAuthorizedOperations)
			},
			grant: []acl.Binding{allow(acl.ResourceCluster, acl.ClusterName, acl.OpDescribe)},
		},
		61: { // DescribeProducers: READ on the topic
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeProducersRequest()
				r.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode)
			},
			want:  kerr.TopicAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceTopic, "t", acl.OpRead)},
		},
		65: { // DescribeTransactions: DESCRIBE on each transactional id
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeTransactionsRequest()
				r.TransactionalIDs = []string{"tx"}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode)
			},
			want:  kerr.TransactionalIDAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceTransactionalID, "tx", acl.OpDescribe)},
		},
		66: { // ListTransactions: the ids the client may DESCRIBE
			req: func() kmsg.Request { return kmsg.NewPtrListTransactionsRequest() },
			visible: func(r kmsg.Response) int {
				lr := r.(*kmsg.ListTransactionsResponse)
				if lr.ErrorCode != 0 {
					return -1
				}
				return len(lr.TransactionStates)
			},
			grant: []acl.Binding{allow(acl.ResourceTransactionalID, "tx", acl.OpDescribe)},
		},
		68: { // ConsumerGroupHeartbeat: READ on the group
			req: func() kmsg.Request {
				r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "cg", "m0000000000000000000000", 0, 10000
				r.SubscribedTopicNames = []string{"t"}
				r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode)
			},
			want:  kerr.GroupAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceGroup, "cg", acl.OpRead), allow(acl.ResourceTopic, "t", acl.OpDescribe)},
		},
		69: { // ConsumerGroupDescribe: DESCRIBE on each group
			req: func() kmsg.Request {
				r := kmsg.NewPtrConsumerGroupDescribeRequest()
				r.Groups = []string{"cg"}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode)
			},
			want: kerr.GroupAuthorizationFailed,
		},
		75: { // DescribeTopicPartitions of a named topic: DESCRIBE on it
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeTopicPartitionsRequest()
				r.ResponsePartitionLimit = 100
				r.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "t"}}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.DescribeTopicPartitionsResponse).Topics[0].ErrorCode)
			},
			want:  kerr.TopicAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceTopic, "t", acl.OpDescribe)},
		},
		76: { // ShareGroupHeartbeat: READ on the group
			req: func() kmsg.Request {
				r := kmsg.NewPtrShareGroupHeartbeatRequest()
				r.GroupID, r.MemberID, r.MemberEpoch = "sg", "m0000000000000000000000", 0
				r.SubscribedTopicNames = []string{"t"}
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
			grant: []acl.Binding{allow(acl.ResourceGroup, "sg", acl.OpRead), allow(acl.ResourceTopic, "t", acl.OpDescribe)},
		},
		77: { // ShareGroupDescribe: DESCRIBE on each group
			req: func() kmsg.Request {
				r := kmsg.NewPtrShareGroupDescribeRequest()
				r.GroupIDs = []string{"sg"}
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.ShareGroupDescribeResponse).Groups[0].ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
		},
		78: { // ShareFetch: READ on the group first
			req: func() kmsg.Request {
				r := kmsg.NewPtrShareFetchRequest()
				r.GroupID, r.MemberID = kmsg.StringPtr("sg"), kmsg.StringPtr("m0000000000000000000000")
				r.MaxBytes, r.MaxRecords, r.BatchSize = 1<<20, 100, 100
				rt := kmsg.NewShareFetchRequestTopic()
				rt.TopicID = tid
				rt.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}
				r.Topics = append(r.Topics, rt)
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.ShareFetchResponse).ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
		},
		79: { // ShareAcknowledge: READ on the group first
			req: func() kmsg.Request {
				r := kmsg.NewPtrShareAcknowledgeRequest()
				r.GroupID, r.MemberID, r.ShareSessionEpoch = kmsg.StringPtr("sg"), kmsg.StringPtr("m0000000000000000000000"), 1
				rt := kmsg.NewShareAcknowledgeRequestTopic()
				rt.TopicID = tid
				rt.Partitions = []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0,
					AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}}}
				r.Topics = append(r.Topics, rt)
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.ShareAcknowledgeResponse).ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
		},
		90: { // DescribeShareGroupOffsets: DESCRIBE on each group
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
				g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
				g.GroupID = "sg"
				r.Groups = append(r.Groups, g)
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0].ErrorCode)
			},
			want: kerr.GroupAuthorizationFailed,
		},
		91: { // AlterShareGroupOffsets: READ on the group
			req: func() kmsg.Request {
				r := kmsg.NewPtrAlterShareGroupOffsetsRequest()
				r.GroupID = "sg"
				r.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "t",
					Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 0}}}}
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.AlterShareGroupOffsetsResponse).ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
		},
		92: { // DeleteShareGroupOffsets: DELETE on the group
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
				r.GroupID = "sg"
				r.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "t"}}
				return r
			},
			codes: func(r kmsg.Response) []int16 { return one(r.(*kmsg.DeleteShareGroupOffsetsResponse).ErrorCode) },
			want:  kerr.GroupAuthorizationFailed,
		},
	}

	// Other forms of the same APIs whose refusal differs: a replica's
	// fetch, transactional ids, config resources of other types.
	variants := []struct {
		key  int16
		what string
		tc   authzCase
	}{
		{1, "from a replica (CLUSTER_ACTION)", authzCase{
			req: func() kmsg.Request {
				r := cases[1].req().(*kmsg.FetchRequest)
				r.ReplicaID, r.ReplicaState.ID, r.ReplicaState.Epoch = 2, 2, 1
				return r
			},
			codes: cases[1].codes, want: kerr.TopicAuthorizationFailed,
		}},
		{23, "from a replica (CLUSTER_ACTION or DESCRIBE)", authzCase{
			req: func() kmsg.Request {
				r := cases[23].req().(*kmsg.OffsetForLeaderEpochRequest)
				r.ReplicaID = 2
				return r
			},
			codes: cases[23].codes, want: kerr.TopicAuthorizationFailed,
		}},
		{10, "of a transactional id", authzCase{
			req: func() kmsg.Request {
				r := kmsg.NewPtrFindCoordinatorRequest()
				r.CoordinatorType, r.CoordinatorKeys = 1, []string{"tx"}
				return r
			},
			codes: cases[10].codes, want: kerr.TransactionalIDAuthorizationFailed,
		}},
		{22, "with a transactional id", authzCase{
			req: func() kmsg.Request {
				r := kmsg.NewPtrInitProducerIDRequest()
				r.TransactionalID, r.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 60_000
				return r
			},
			codes: cases[22].codes, want: kerr.TransactionalIDAuthorizationFailed,
		}},
		{24, "v3, the client form", authzCase{
			version: 3,
			req: func() kmsg.Request {
				r := kmsg.NewPtrAddPartitionsToTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", 1<<40, 0
				r.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0}}}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				return one(r.(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode)
			},
			want: kerr.TransactionalIDAuthorizationFailed,
		}},
		{32, "of a broker and a group", authzCase{
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeConfigsRequest()
				for _, rr := range []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"},
					{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: "g"}} {
					r.Resources = append(r.Resources, rr)
				}
				return r
			},
			codes: func(r kmsg.Response) []int16 {
				dr := r.(*kmsg.DescribeConfigsResponse)
				// CLUSTER_ for the broker, GROUP_ for the group:
				// folded into one code for the comparison.
				if dr.Resources[0].ErrorCode == kerr.ClusterAuthorizationFailed.Code && dr.Resources[1].ErrorCode == kerr.GroupAuthorizationFailed.Code {
					return one(kerr.ClusterAuthorizationFailed.Code)
				}
				return []int16{dr.Resources[0].ErrorCode, dr.Resources[1].ErrorCode}
			},
			want: kerr.ClusterAuthorizationFailed,
		}},
		{44, "of a broker", authzCase{
			req: func() kmsg.Request {
				r := kmsg.NewPtrIncrementalAlterConfigsRequest()
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
				rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "log.retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("60000")}}
				r.Resources = append(r.Resources, rr)
				return r
			},
			codes: cases[44].codes, want: kerr.ClusterAuthorizationFailed,
		}},
	}

	c := dialRaw(t, b.addr)
	send := func(key int16, tc authzCase) (kmsg.Response, int16) {
		t.Helper()
		req := tc.req()
		r, _ := protocol.Versions(key)
		v := r.Max
		if kv := protocol.KmsgMaxVersion(key); kv < v {
			v = kv
		}
		if tc.version != 0 {
			v = tc.version
		}
		req.SetVersion(v)
		c.nc.SetDeadline(time.Now().Add(10 * time.Second))
		c.send(req, 1)
		resp := req.ResponseKind()
		resp.SetVersion(v)
		// ApiVersions answers with the old header at every version.
		if _, err := c.recv(resp, req.IsFlexible() && key != 18); err != nil {
			t.Fatalf("%s v%d: %v", apiName(key), v, err)
		}
		return resp, v
	}
	isAuthz := func(code int16) bool {
		for _, e := range authzCodes {
			if code == e.Code {
				return true
			}
		}
		return false
	}

	var grants []acl.Binding
	for _, key := range protocol.Keys() {
		tc, ok := cases[key]
		if !ok {
			t.Errorf("%s (key %d) is advertised but has no case here: add the request and Kafka's refusal", apiName(key), key)
			continue
		}
		grants = append(grants, tc.grant...)
		resp, v := send(key, tc)
		name := apiName(key)
		switch {
		case tc.unchecked != "":
			for _, code := range tc.codes(resp) {
				if isAuthz(code) {
					t.Errorf("%s v%d (%s): %v", name, v, tc.unchecked, kerr.ErrorForCode(code))
				}
			}
		case tc.visible != nil:
			if n := tc.visible(resp); n != 0 {
				t.Errorf("%s v%d without ACLs shows %d (-1: an error), want nothing", name, v, n)
			}
		default:
			for _, code := range tc.codes(resp) {
				if code == -1 {
					t.Errorf("%s v%d without ACLs: an entry Kafka's error response has is missing: %+v", name, v, resp)
				} else if code != tc.want.Code {
					t.Errorf("%s v%d without ACLs: %v, want %v", name, v, kerr.ErrorForCode(code), tc.want)
				}
			}
		}
	}
	for _, vc := range variants {
		resp, v := send(vc.key, vc.tc)
		for _, code := range vc.tc.codes(resp) {
			if code != vc.tc.want.Code {
				t.Errorf("%s v%d %s without ACLs: %v, want %v", apiName(vc.key), v, vc.what, kerr.ErrorForCode(code), vc.tc.want)
			}
		}
	}
	for key := range cases {
		if _, ok := protocol.Versions(key); !ok {
			t.Errorf("key %d has a case but is not advertised", key)
		}
	}
	if t.Failed() {
		return
	}

	// Allowed on the group, refused on the topic: the refusal moves to
	// the topic (a topic u that no ACL ever names).
	if _, err := mc.CreateTopic(ctx, metastore.TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	u, _ := mc.TopicByName("u")
	uid := [16]byte(u.ID)
	topicRefusals := []struct {
		key   int16
		grant acl.Binding
		req   func() kmsg.Request
		codes func(kmsg.Response) []int16
	}{
		{8, allow(acl.ResourceGroup, "g2", acl.OpRead), func() kmsg.Request {
			r := cases[8].req().(*kmsg.OffsetCommitRequest)
			r.Group, r.Topics[0].Topic, r.Topics[0].TopicID = "g2", "u", uid
			return r
		}, cases[8].codes},
		{47, allow(acl.ResourceGroup, "g2", acl.OpDelete), func() kmsg.Request {
			r := cases[47].req().(*kmsg.OffsetDeleteRequest)
			r.Group, r.Topics[0].Topic = "g2", "u"
			return r
		}, func(r kmsg.Response) []int16 {
			od := r.(*kmsg.OffsetDeleteResponse)
			return []int16{od.Topics[0].Partitions[0].ErrorCode}
		}},
		{68, allow(acl.ResourceGroup, "cg2", acl.OpRead), func() kmsg.Request {
			r := cases[68].req().(*kmsg.ConsumerGroupHeartbeatRequest)
			r.Group, r.SubscribedTopicNames = "cg2", []string{"u"}
			return r
		}, cases[68].codes},
		{76, allow(acl.ResourceGroup, "sg2", acl.OpRead), func() kmsg.Request {
			r := cases[76].req().(*kmsg.ShareGroupHeartbeatRequest)
			r.GroupID, r.SubscribedTopicNames = "sg2", []string{"u"}
			return r
		}, cases[76].codes},
		{78, allow(acl.ResourceGroup, "sg2", acl.OpRead), func() kmsg.Request {
			r := cases[78].req().(*kmsg.ShareFetchRequest)
			r.GroupID, r.Topics[0].TopicID = kmsg.StringPtr("sg2"), uid
			return r
		}, func(r kmsg.Response) []int16 {
			sf := r.(*kmsg.ShareFetchResponse)
			if sf.ErrorCode != 0 || len(sf.Topics) == 0 {
				return []int16{sf.ErrorCode}
			}
			return []int16{sf.Topics[0].Partitions[0].ErrorCode}
		}},
		{90, allow(acl.ResourceGroup, "sg2", acl.OpDescribe), func() kmsg.Request {
			r := cases[90].req().(*kmsg.DescribeShareGroupOffsetsRequest)
			r.Groups[0].GroupID = "sg2"
			r.Groups[0].Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "u", Partitions: []int32{0}}}
			return r
		}, func(r kmsg.Response) []int16 {
			g := r.(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0]
			if g.ErrorCode != 0 || len(g.Topics) == 0 {
				return []int16{g.ErrorCode}
			}
			return []int16{g.Topics[0].Partitions[0].ErrorCode}
		}},
		{91, allow(acl.ResourceGroup, "sg2", acl.OpRead), func() kmsg.Request {
			r := cases[91].req().(*kmsg.AlterShareGroupOffsetsRequest)
			r.GroupID, r.Topics[0].Topic = "sg2", "u"
			return r
		}, func(r kmsg.Response) []int16 {
			ar := r.(*kmsg.AlterShareGroupOffsetsResponse)
			if ar.ErrorCode != 0 || len(ar.Topics) == 0 {
				return []int16{ar.ErrorCode}
			}
			return []int16{ar.Topics[0].Partitions[0].ErrorCode}
		}},
		{92, allow(acl.ResourceGroup, "sg2", acl.OpDelete), func() kmsg.Request {
			r := cases[92].req().(*kmsg.DeleteShareGroupOffsetsRequest)
			r.GroupID, r.Topics[0].Topic = "sg2", "u"
			return r
		}, func(r kmsg.Response) []int16 {
			dr := r.(*kmsg.DeleteShareGroupOffsetsResponse)
			if dr.ErrorCode != 0 || len(dr.Topics) == 0 {
				return []int16{dr.ErrorCode}
			}
			return []int16{dr.Topics[0].ErrorCode}
		}},
	}
	var groupGrants []acl.Binding
	for _, tr := range topicRefusals {
		groupGrants = append(groupGrants, tr.grant)
	}
	if err := mc.CreateACLs(ctx, groupGrants); err != nil {
		t.Fatal(err)
	}
	for _, tr := range topicRefusals {
		resp, v := send(tr.key, authzCase{req: tr.req})
		for _, code := range tr.codes(resp) {
			if code != kerr.TopicAuthorizationFailed.Code {
				t.Errorf("%s v%d with %v, without ACLs on the topic: %v, want TOPIC_AUTHORIZATION_FAILED", apiName(tr.key), v, tr.grant, kerr.ErrorForCode(code))
			}
		}
	}

	// The same principal, with the ACLs each API needs.
	if err := mc.CreateACLs(ctx, grants); err != nil {
		t.Fatal(err)
	}
	// The data path, answered without any error once allowed; the other
	// APIs may still refuse these minimal requests for other reasons
	// (an unknown member, say), just not for authorization.
	dataPath := map[int16]bool{0: true, 1: true, 2: true, 3: true, 8: true, 9: true, 10: true, 22: true, 23: true, 61: true, 65: true, 75: true}
	served := 0
	for _, key := range protocol.Keys() {
		tc := cases[key]
		if len(tc.grant) == 0 {
			continue
		}
		served++
		resp, v := send(key, tc)
		name := apiName(key)
		if tc.visible != nil {
			if n := tc.visible(resp); n <= 0 {
				t.Errorf("%s v%d with %v shows %d (-1: an error)", name, v, tc.grant, n)
			}
			continue
		}
		if dataPath[key] {
			// Served in full: no error at all, once the partition's
			// leader is known (retriable errors are retried).
			deadline := time.Now().Add(10 * time.Second)
			for {
				var bad error
				for _, code := range tc.codes(resp) {
					if code != 0 {
						bad = kerr.ErrorForCode(code)
					}
				}
				if bad == nil {
					break
				}
				if !kerr.IsRetriable(bad) || time.Now().After(deadline) {
					t.Errorf("%s v%d with %v: %v, want it served", name, v, tc.grant, bad)
					break
				}
				time.Sleep(50 * time.Millisecond)
				resp, _ = send(key, tc)
			}
			continue
		}
		for _, code := range tc.codes(resp) {
			if isAuthz(code) {
				t.Errorf("%s v%d with %v: %v", name, v, tc.grant, kerr.ErrorForCode(code))
			}
		}
	}
	if served < 20 {
		t.Fatalf("only %d APIs checked with their ACLs", served)
	}
}
