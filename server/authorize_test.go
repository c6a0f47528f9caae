package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
)

func anonymousACL(rt acl.ResourceType, name string, pt acl.PatternType, op acl.Operation, perm acl.Permission) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: acl.Anonymous, Host: "*", Operation: op, Permission: perm}
}

func advertised(t *testing.T, cl *kgo.Client, key int16) bool {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key {
			return true
		}
	}
	return false
}

// TestAuthorizationWiring drives a broker with the authorizer on through a
// real client on a PLAINTEXT listener, whose principal is User:ANONYMOUS:
// every refusal carries Kafka's error code, and ACLs added and removed
// through the Kafka API take effect on the next request.
func TestAuthorizationWiring(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) {
		c.AuthorizerClassName = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		c.AutoCreateTopics = false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := b.client(t, kgo.DisableIdempotentWrite(), kgo.RecordRetries(0), kgo.DefaultProduceTopic("t"))
	for _, key := range []int16{29, 30, 31} {
		if !advertised(t, cl, key) {
			t.Fatalf("key %d not advertised with the authorizer on", key)
		}
	}

	createACLs := func(bs ...acl.Binding) *kmsg.CreateACLsResponse {
		t.Helper()
		req := kmsg.NewPtrCreateACLsRequest()
		for _, b := range bs {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
			c.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			c.Principal, c.Host = b.Principal, b.Host
			c.Operation, c.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
			req.Creations = append(req.Creations, c)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	code := func(c int16) error { return kerr.ErrorForCode(c) }

	// Nothing is allowed yet, not even managing ACLs.
	if r := createACLs(anonymousACL(acl.ResourceTopic, "t", acl.PatternLiteral, acl.OpWrite, acl.Allow)); !errors.Is(code(r.Results[0].ErrorCode), kerr.ClusterAuthorizationFailed) {
		t.Fatalf("CreateAcls without ALTER on the cluster: %v", code(r.Results[0].ErrorCode))
	}
	// Bootstrap, as an operator would with a super user: through the
	// metastore.
	if err := b.meta.Client().CreateACLs(ctx, []acl.Binding{
		anonymousACL(acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral, acl.OpAlter, acl.Allow),
		anonymousACL(acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral, acl.OpCreate, acl.Allow),
	}); err != nil {
		t.Fatal(err)
	}
	r := createACLs(
		anonymousACL(acl.ResourceGroup, "other", acl.PatternLiteral, acl.OpRead, acl.Allow),
		acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "t", PatternType: acl.PatternLiteral, Principal: "ANONYMOUS", Host: "*", Operation: acl.OpRead, Permission: acl.Allow},
		anonymousACL(acl.ResourceCluster, "not-the-cluster", acl.PatternLiteral, acl.OpAlter, acl.Allow),
		anonymousACL(acl.ResourceTopic, "t", acl.PatternMatch, acl.OpRead, acl.Allow),
	)
	for i, want := range []error{nil, kerr.InvalidRequest, kerr.InvalidRequest, kerr.InvalidRequest} {
		if got := code(r.Results[i].ErrorCode); !errors.Is(got, want) && !(want == nil && got == nil) {
			t.Fatalf("creation %d: %v, want %v", i, got, want)
		}
	}

	// A topic the client may create but not write or describe.
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 5
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, 1
	ct.Topics = append(ct.Topics, rt)
	ctr, err := ct.RequestWith(ctx, cl)
	if err != nil || ctr.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics with CREATE on the cluster: %v %v", err, ctr)
	}
	if got := code(ctr.Topics[0].ConfigErrorCode); !errors.Is(got, kerr.TopicAuthorizationFailed) {
		t.Fatalf("CreateTopics configs without DESCRIBE_CONFIGS: %v", got)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce without WRITE: %v", err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = nil // every topic
	mr, err := md.RequestWith(ctx, cl)
	if err != nil || len(mr.Topics) != 0 {
		t.Fatalf("Metadata of every topic lists undescribable ones: %v %+v", err, mr.Topics)
	}
	for _, name := range []string{"t", "does-not-exist"} {
		md := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		md.Topics = append(md.Topics, mt)
		mr, err := md.RequestWith(ctx, cl)
		if err != nil || !errors.Is(code(mr.Topics[0].ErrorCode), kerr.TopicAuthorizationFailed) {
			t.Fatalf("Metadata of %s without DESCRIBE: %v %v", name, err, code(mr.Topics[0].ErrorCode))
		}
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
	jg.Protocols = append(jg.Protocols, kmsg.JoinGroupRequestProtocol{Name: "range"})
	// kgo turns a group error into the request's error.
	if jr, err := jg.RequestWith(ctx, cl); !errors.Is(err, kerr.GroupAuthorizationFailed) && (err != nil || !errors.Is(code(jr.ErrorCode), kerr.GroupAuthorizationFailed)) {
		t.Fatalf("JoinGroup without READ: %v %v", err, jr)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	if fr, err := fc.RequestWith(ctx, cl); !errors.Is(err, kerr.GroupAuthorizationFailed) && (err != nil || !errors.Is(code(fr.ErrorCode), kerr.GroupAuthorizationFailed)) {
		t.Fatalf("FindCoordinator without DESCRIBE on the group: %v %v", err, fr)
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	if ir, err := ip.RequestWith(ctx, cl); err != nil || !errors.Is(code(ir.ErrorCode), kerr.ClusterAuthorizationFailed) {
		t.Fatalf("InitProducerId without IDEMPOTENT_WRITE or WRITE: %v %v", err, ir)
	}
	// ALTER on the cluster implies DESCRIBE, not DESCRIBE_CONFIGS.
	dcf := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	dcf.Resources = append(dcf.Resources, res)
	if dr, err := dcf.RequestWith(ctx, cl); err != nil || !errors.Is(code(dr.Resources[0].ErrorCode), kerr.ClusterAuthorizationFailed) {
		t.Fatalf("DescribeConfigs of a broker without DESCRIBE_CONFIGS on the cluster: %v %v", err, dr)
	}
	lp := kmsg.NewPtrListPartitionReassignmentsRequest()
	if lr, err := lp.RequestWith(ctx, cl); err != nil || lr.ErrorCode != 0 {
		t.Fatalf("ListPartitionReassignments with ALTER (implying DESCRIBE) on the cluster: %v %v", err, lr)
	}

	// ALLOW WRITE on a prefix: produce works, the topic becomes visible
	// (WRITE implies DESCRIBE), InitProducerId too (KIP-679).
	if r := createACLs(anonymousACL(acl.ResourceTopic, "t", acl.PatternPrefixed, acl.OpWrite, acl.Allow)); r.Results[0].ErrorCode != 0 {
		t.Fatalf("CreateAcls: %v", code(r.Results[0].ErrorCode))
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce with WRITE: %v", err)
	}
	if ir, err := ip.RequestWith(ctx, cl); err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId with WRITE on a topic: %v %v", err, ir)
	}
	md = kmsg.NewPtrMetadataRequest()
	md.Topics = nil
	md.IncludeTopicAuthorizedOperations = true
	md.IncludeClusterAuthorizedOperations = true
	md.Version = 10
	mr, err = md.RequestWith(ctx, cl)
	if err != nil || len(mr.Topics) != 1 {
		t.Fatalf("Metadata of every topic: %v %+v", err, mr.Topics)
	}
	if want := acl.OpsBits([]acl.Operation{acl.OpWrite, acl.OpDescribe}); mr.Topics[0].AuthorizedOperations != want {
		t.Fatalf("topic authorized operations %b, want %b", mr.Topics[0].AuthorizedOperations, want)
	}
	// The cluster's authorized operations are in Metadata v8-10 only
	// (kgo would pick a newer version).
	clusterOps := acl.OpsBits([]acl.Operation{acl.OpCreate, acl.OpAlter, acl.OpDescribe})
	raw := dialRaw(t, b.addr)
	md.Version = 10 // RequestWith above set the version kgo chose
	raw.send(md, 3)
	mr10 := kmsg.NewPtrMetadataResponse()
	mr10.Version = 10
	if _, err := raw.recv(mr10, true); err != nil || mr10.AuthorizedOperations != clusterOps {
		t.Fatalf("Metadata v10 cluster authorized operations %b (%v), want %b", mr10.AuthorizedOperations, err, clusterOps)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	if dr, err := dc.RequestWith(ctx, cl); err != nil || dr.ClusterAuthorizedOperations != clusterOps {
		t.Fatalf("DescribeCluster authorized operations: %v %b", err, dr.ClusterAuthorizedOperations)
	}

	// DENY wins; deleting it restores the ALLOW.
	deny := anonymousACL(acl.ResourceTopic, "t", acl.PatternLiteral, acl.OpWrite, acl.Deny)
	if r := createACLs(deny); r.Results[0].ErrorCode != 0 {
		t.Fatal(code(r.Results[0].ErrorCode))
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce with a DENY: %v", err)
	}
	da := kmsg.NewPtrDescribeACLsRequest()
	da.ResourceType, da.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeMatch
	da.ResourceName = kmsg.StringPtr("t")
	da.Operation, da.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr, err := da.RequestWith(ctx, cl)
	if err != nil || dr.ErrorCode != 0 || len(dr.Resources) != 2 {
		t.Fatalf("DescribeAcls MATCH t: %v %v %+v", err, code(dr.ErrorCode), dr.Resources)
	}
	da.ResourceType = 0 // UNKNOWN
	if dr, err := da.RequestWith(ctx, cl); err != nil || !errors.Is(code(dr.ErrorCode), kerr.InvalidRequest) {
		t.Fatalf("DescribeAcls with an UNKNOWN element: %v %v", err, dr)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeDeny
	bad := f
	bad.Operation = 0
	del.Filters = append(del.Filters, f, bad)
	delr, err := del.RequestWith(ctx, cl)
	if err != nil || delr.Results[0].ErrorCode != 0 || len(delr.Results[0].MatchingACLs) != 1 || !errors.Is(code(delr.Results[1].ErrorCode), kerr.InvalidRequest) {
		t.Fatalf("DeleteAcls: %v %+v", err, delr)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce after the DENY was deleted: %v", err)
	}
}

// TestAclAPIsWithoutAuthorizer: not advertised, SECURITY_DISABLED if sent.
func TestAclAPIsWithoutAuthorizer(t *testing.T) {
	b := startBroker(t, nil)
	cl := b.client(t)
	if advertised(t, cl, 30) {
		t.Fatal("CreateAcls advertised without an authorizer")
	}
	// A client that sends it anyway (kgo refuses to) gets an answer.
	c := dialRaw(t, b.addr)
	da := kmsg.NewPtrDescribeACLsRequest()
	da.Version = 1
	c.send(da, 7)
	dr := kmsg.NewPtrDescribeACLsResponse()
	dr.Version = 1
	if corr, err := c.recv(dr, false); err != nil || corr != 7 {
		t.Fatalf("DescribeAcls answer: %v (correlation %d)", err, corr)
	}
	if !errors.Is(kerr.ErrorForCode(dr.ErrorCode), kerr.SecurityDisabled) {
		t.Fatalf("DescribeAcls without an authorizer: %v", kerr.ErrorForCode(dr.ErrorCode))
	}
}

// rawDo sends req at its version on c and decodes the answer.
func rawDo(t *testing.T, c *rawConn, req kmsg.Request) kmsg.Response {
	t.Helper()
	c.send(req, 1)
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if _, err := c.recv(resp, req.IsFlexible()); err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// TestAuthorizationGroups checks the group and offset APIs against a real
// coordinator: refused groups and topics get their own error codes while
// the allowed ones are served, and listings leave out what the client may
// not describe.
func TestAuthorizationGroups(t *testing.T) {
	b := startBrokerWith(t, func(c *configs.Config) { c.AuthorizerEnable = true }, func(o *Options, meta *metastore.Node) {
		g, err := coordinator.New(coordinator.Config{BrokerID: o.Config.NodeID, Store: meta.Client(), Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		o.Groups = g
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mc := b.meta.Client()
	for _, name := range []string{"a", "b"} {
		if _, err := mc.CreateTopic(ctx, metastore.TopicSpec{Name: name, Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := mc.CreateACLs(ctx, []acl.Binding{
		anonymousACL(acl.ResourceGroup, "g-ok", acl.PatternLiteral, acl.OpRead, acl.Allow),
		anonymousACL(acl.ResourceTopic, "a", acl.PatternLiteral, acl.OpRead, acl.Allow),
	}); err != nil {
		t.Fatal(err)
	}
	// Offsets of b and of another group, committed behind the broker's
	// back, which the client must not see.
	tp := func(topic string) metastore.OffsetCommit {
		return metastore.OffsetCommit{TopicPartition: metastore.TopicPartition{Topic: topic, Partition: 0}, Offset: 7, LeaderEpoch: -1}
	}
	if err := mc.CommitOffsets(ctx, metastore.Fence{}, "g-ok", []metastore.OffsetCommit{tp("b")}); err != nil {
		t.Fatal(err)
	}
	if err := mc.CommitOffsets(ctx, metastore.Fence{}, "g-hidden", []metastore.OffsetCommit{tp("a")}); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, b.addr)
	code := func(c int16) error { return kerr.ErrorForCode(c) }

	commit := func(group string) *kmsg.OffsetCommitResponse {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, group, -1
		for _, topic := range []string{"a", "b"} {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset = 3
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		return rawDo(t, c, req).(*kmsg.OffsetCommitResponse)
	}
	errs := func(resp *kmsg.OffsetCommitResponse) map[string]error {
		out := map[string]error{}
		for _, rt := range resp.Topics {
			out[rt.Topic] = code(rt.Partitions[0].ErrorCode)
		}
		return out
	}
	if got := errs(commit("g-ok")); got["a"] != nil || !errors.Is(got["b"], kerr.TopicAuthorizationFailed) {
		t.Fatalf("OffsetCommit g-ok: %v, want a committed and b TOPIC_AUTHORIZATION_FAILED", got)
	}
	if got := errs(commit("g-no")); !errors.Is(got["a"], kerr.GroupAuthorizationFailed) || !errors.Is(got["b"], kerr.GroupAuthorizationFailed) {
		t.Fatalf("OffsetCommit g-no: %v, want GROUP_AUTHORIZATION_FAILED", got)
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	all := kmsg.NewOffsetFetchRequestGroup()
	all.Group = "g-ok" // every committed topic
	named := kmsg.NewOffsetFetchRequestGroup()
	named.Group = "g-no"
	fetch.Groups = append(fetch.Groups, all, named)
	fr := rawDo(t, c, fetch).(*kmsg.OffsetFetchResponse)
	if len(fr.Groups) != 2 {
		t.Fatalf("OffsetFetch answered %d groups", len(fr.Groups))
	}
	for _, g := range fr.Groups {
		switch g.Group {
		case "g-ok":
			if g.ErrorCode != 0 || len(g.Topics) != 1 || g.Topics[0].Topic != "a" || g.Topics[0].Partitions[0].Offset != 3 {
				t.Fatalf("OffsetFetch of every topic of g-ok: %+v, want a alone (b is not describable)", g)
			}
		case "g-no":
			if !errors.Is(code(g.ErrorCode), kerr.GroupAuthorizationFailed) {
				t.Fatalf("OffsetFetch g-no: %v", code(g.ErrorCode))
			}
		}
	}
	fetch.Groups = fetch.Groups[:1]
	fetch.Groups[0].Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "b", Partitions: []int32{0}}}
	fr = rawDo(t, c, fetch).(*kmsg.OffsetFetchResponse)
	if p := fr.Groups[0].Topics[0].Partitions[0]; !errors.Is(code(p.ErrorCode), kerr.TopicAuthorizationFailed) || p.Offset != -1 {
		t.Fatalf("OffsetFetch of b by name: %+v, want TOPIC_AUTHORIZATION_FAILED and no offset", p)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups, dg.IncludeAuthorizedOperations = 5, []string{"g-ok", "g-no"}, true
	dr := rawDo(t, c, dg).(*kmsg.DescribeGroupsResponse)
	for _, g := range dr.Groups {
		switch g.Group {
		case "g-ok":
			if want := acl.OpsBits([]acl.Operation{acl.OpRead, acl.OpDescribe}); g.ErrorCode != 0 || g.AuthorizedOperations != want {
				t.Fatalf("DescribeGroups g-ok: %v, authorized operations %b, want %b", code(g.ErrorCode), g.AuthorizedOperations, want)
			}
		case "g-no":
			if !errors.Is(code(g.ErrorCode), kerr.GroupAuthorizationFailed) {
				t.Fatalf("DescribeGroups g-no: %v", code(g.ErrorCode))
			}
		default:
			t.Fatalf("DescribeGroups answered %q", g.Group)
		}
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 4
	lr := rawDo(t, c, lg).(*kmsg.ListGroupsResponse)
	if len(lr.Groups) != 1 || lr.Groups[0].Group != "g-ok" {
		t.Fatalf("ListGroups without DESCRIBE on the cluster: %+v, want g-ok alone", lr.Groups)
	}
	dl := kmsg.NewPtrDeleteGroupsRequest()
	dl.Version, dl.Groups = 2, []string{"g-hidden"}
	if r := rawDo(t, c, dl).(*kmsg.DeleteGroupsResponse); !errors.Is(code(r.Groups[0].ErrorCode), kerr.GroupAuthorizationFailed) {
		t.Fatalf("DeleteGroups without DELETE: %v", code(r.Groups[0].ErrorCode))
	}
}
