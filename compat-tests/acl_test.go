package compat

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// Authorization (docs/security.md) with Kafka's own ACL tool
// (org.apache.kafka.tools.AclCommand, kafka-acls.sh) and franz-go's kadm,
// on PLAINTEXT listeners, where every client is User:ANONYMOUS, as in
// Kafka. The brokers run with allow.everyone.if.no.acl.found=true, so
// that the test can give itself the cluster permissions through the Kafka
// API; a topic or group that has ACLs for someone else is then refused to
// ANONYMOUS until an ACL allows it, which is Kafka's rule.

const (
	clsACLs    = "org.apache.kafka.tools.AclCommand"
	standardAz = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	anonymous  = "User:ANONYMOUS"
)

func authorizerArgs() []string {
	return []string{"--set", "authorizer.class.name=" + standardAz, "--set", "allow.everyone.if.no.acl.found=true",
		"--set", "auto.create.topics.enable=false"}
}

// allowClusterAdmin gives ANONYMOUS what managing ACLs and topics needs.
func allowClusterAdmin(ctx context.Context, t *testing.T, adm *kadm.Client) {
	t.Helper()
	b := kadm.NewACLs().Clusters().Allow(anonymous).Operations(kadm.OpAlter, kadm.OpDescribe, kadm.OpCreate)
	res, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateACLs %s %s: %v %s", r.Name, r.Operation, r.Err, r.ErrMessage)
		}
	}
}

// joinErr is the error of a JoinGroup as ANONYMOUS (FindCoordinator
// first, as kgo sends it), nil when the join goes through.
func joinErr(ctx context.Context, cl *kgo.Client, group string) error {
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = group, "consumer", 10000, 10000
	jg.Protocols = append(jg.Protocols, kmsg.JoinGroupRequestProtocol{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}})
	resp, err := jg.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil && !errors.Is(err, kerr.MemberIDRequired) {
		return err
	}
	return nil
}

func TestACLsKafkaToolAndKadm(t *testing.T) {
	t.Parallel()
	var cp string
	t.Run("java-build", func(t *testing.T) {
		requireTool(t, "java")
		requireTool(t, "mvn")
		cp = buildJava(t)
	})
	if cp == "" {
		harness.SkipMissing(t, "java, mvn and the compat-tests/java dependencies")
	}
	b := startBroker(t, authorizerArgs()...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.KafkaAddr)
	allowClusterAdmin(ctx, t, adm)
	const topic, group = "acl-orders", "acl-group"
	createTopic(ctx, t, adm, topic, 2, nil)

	acls := func(args ...string) string {
		t.Helper()
		out, stderr, err := tool(t, cp, "", clsACLs, append([]string{"--bootstrap-server", b.KafkaAddr}, args...)...)
		if err != nil {
			t.Fatalf("kafka-acls %s: %v", strings.Join(args, " "), toolErr(err, stderr))
		}
		return out
	}
	// Someone else's ACLs make the topic and the group protected. (Each
	// JVM costs seconds: the tool runs four times in all.)
	acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic, "--group", group)

	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(2))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("refused")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce without an ACL for ANONYMOUS: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := joinErr(ctx, cl, group); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("join without an ACL for ANONYMOUS: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	// Kafka's --consumer (READ, DESCRIBE on the topic, READ on the group)
	// and a WRITE through kadm.
	acls("--add", "--allow-principal", anonymous, "--consumer", "--topic", topic, "--group", group)
	if res, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics(topic).Allow(anonymous).Operations(kadm.OpWrite)); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs WRITE: %v %+v", err, res)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("allowed")}).FirstErr(); err != nil {
		t.Fatalf("produce with WRITE: %v", err)
	}
	cons := newClient(t, b.KafkaAddr, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	var got *kgo.Record
	for got == nil && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("consume with --consumer ACLs: %v", errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = r })
	}
	if got == nil || string(got.Value) != "allowed" {
		t.Fatalf("consumed %v", got)
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit with --consumer ACLs: %v", err)
	}

	// The same ACLs through kadm; then a DENY wins over the ALLOW.
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternMatch).
		Allow().AllowHosts().Operations(kadm.OpAny))
	if err != nil || len(described) != 1 || described[0].Err != nil {
		t.Fatalf("DescribeACLs: %v %+v", err, described)
	}
	// alice READ; ANONYMOUS READ, DESCRIBE, WRITE.
	if n := len(described[0].Described); n != 4 {
		t.Fatalf("DescribeACLs found %d ACLs on %s, want 4: %+v", n, topic, described[0].Described)
	}
	deny := kadm.NewACLs().Topics(topic).Deny(anonymous).Operations(kadm.OpWrite)
	if res, err := adm.CreateACLs(ctx, deny); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs DENY: %v %+v", err, res)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("denied")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce with a DENY: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	del, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics(topic).Deny(anonymous).DenyHosts().Operations(kadm.OpAny))
	if err != nil || len(del) != 1 || del[0].Err != nil || len(del[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs of the DENY: %v %+v", err, del)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("allowed again")}).FirstErr(); err != nil {
		t.Fatalf("produce after the DENY was deleted: %v", err)
	}
	// kafka-acls --remove takes the WRITE away again; --list shows what
	// is left.
	acls("--remove", "--force", "--allow-principal", anonymous, "--operation", "Write", "--topic", topic)
	out := acls("--list", "--topic", topic)
	if !strings.Contains(out, "principal=User:alice") || !strings.Contains(out, "principal="+anonymous) {
		t.Fatalf("kafka-acls --list does not show the remaining ACLs:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "principal="+anonymous) && strings.Contains(line, "operation=WRITE") {
			t.Fatalf("kafka-acls --remove left the WRITE: %s", line)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("refused again")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce after kafka-acls --remove: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// TestACLsSplitCluster: an ACL created through a write broker holds on a
// read broker (each broker's authorizer follows the metastore through its
// watch), within a second.
func TestACLsSplitCluster(t *testing.T) {
	c := harness.StartCluster(t, harness.ClusterOptions{Meta: 1, Write: 1, Read: 1,
		Extra: "authorizer.class.name: " + standardAz + "\nallow.everyone.if.no.acl.found: true\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writer := newAdmin(t, c.Writers[0].Listeners[harness.ViewWrite])
	allowClusterAdmin(ctx, t, writer)
	const group = "acl-split"
	protect := kadm.NewACLs().Groups(group).Allow("User:alice").Operations(kadm.OpRead)
	if res, err := writer.CreateACLs(ctx, protect); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs at the write broker: %v %+v", err, res)
	}
	// The read view lists read brokers only: these requests reach one.
	reader := newClient(t, c.Readers[0].Listeners[harness.ViewRead])
	if err := joinErr(ctx, reader, group); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("join at the read broker without an ACL for ANONYMOUS: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	allow := kadm.NewACLs().Groups(group).Allow(anonymous).Operations(kadm.OpRead)
	start := time.Now()
	if res, err := writer.CreateACLs(ctx, allow); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs at the write broker: %v %+v", err, res)
	}
	var err error
	for err = joinErr(ctx, reader, group); err != nil && time.Since(start) < 5*time.Second; err = joinErr(ctx, reader, group) {
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	if err != nil {
		t.Fatalf("join at the read broker after the ALLOW: %v", err)
	}
	t.Logf("the ALLOW created at the write broker held at the read broker after %v", took)
	if took > time.Second {
		t.Errorf("the ACL took %v to reach the read broker, want at most a second", took)
	}
	described, err := kadm.NewClient(reader).DescribeACLs(ctx, kadm.NewACLs().Groups(group).Allow().AllowHosts().Operations(kadm.OpAny))
	if err != nil || len(described) != 1 || len(described[0].Described) != 2 {
		t.Fatalf("DescribeACLs at the read broker: %v %+v", err, described)
	}
}
