package compat

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestConsumerOffsetsAndRegexJavaTools drives Kafka's Java clients (4.x,
// from Maven Central):
//   - the console consumer
//   - reading __consumer_offsets with exclude.internal.topics=false and
//     Kafka's OffsetsMessageFormatter, which decodes the records with
//     Kafka's generated OffsetCommitKey/OffsetCommitValue classes;
//   - and the Java KafkaConsumer in a KIP-848 group (group.protocol=consumer)
//     subscribed with a SubscriptionPattern, which the broker resolves:
//     a topic created after the member joined is consumed too.
func TestConsumerOffsetsAndRegexJavaTools(t *testing.T) {
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
	b := startBroker(t, "--set", "group.consumer.heartbeat.interval.ms=500", "--set", "auto.create.topics.enable=false")
	ctx := harness.Context(t, 2*time.Minute)
	adm := newAdmin(t, b.KafkaAddr)

	t.Run("offsets-formatter", func(t *testing.T) {
		createTopic(ctx, t, adm, "jorders", 2, nil)
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "jorders", Partition: 0, At: 17, LeaderEpoch: -1, Metadata: "jm"})
		os.Add(kadm.Offset{Topic: "jorders", Partition: 1, At: 23, LeaderEpoch: -1})
		if resp, err := adm.CommitOffsets(ctx, "jgroup", os); err != nil || resp.Error() != nil {
			t.Fatalf("commit: %v %v", err, resp.Error())
		}
		out, stderr, err := tool(t, cp, "", clsConsumer, "--bootstrap-server", b.KafkaAddr, "--topic", "__consumer_offsets",
			"--from-beginning", "--max-messages", "2", "--timeout-ms", "30000",
			"--formatter", "org.apache.kafka.tools.consumer.OffsetsMessageFormatter",
			"--command-property", "exclude.internal.topics=false")
		if err != nil {
			t.Fatalf("console consumer: %v", toolErr(err, stderr))
		}
		// The formatter writes one JSON object per record.
		recs := strings.Split(out, `{"key":`)[1:]
		if len(recs) != 2 {
			t.Fatalf("%d records, want 2:\n%s", len(recs), out)
		}
		for _, want := range [][]string{
			{`"group":"jgroup"`, `"topic":"jorders"`, `"partition":0`, `"version":3`, `"offset":17`, `"metadata":"jm"`},
			{`"group":"jgroup"`, `"topic":"jorders"`, `"partition":1`, `"version":3`, `"offset":23`},
		} {
			found := false
			for _, r := range recs {
				ok := true
				for _, w := range want {
					ok = ok && strings.Contains(r, w)
				}
				found = found || ok
			}
			if !found {
				t.Fatalf("no record with %v in:\n%s", want, out)
			}
		}
	})

	t.Run("regex-consumer-protocol", func(t *testing.T) {
		createTopic(ctx, t, adm, "jrx.a", 1, nil)
		createTopic(ctx, t, adm, "jother", 1, nil)
		produceN(ctx, t, b.KafkaAddr, "jrx.a", "a", 2)
		produceN(ctx, t, b.KafkaAddr, "jother", "o", 2)
		const group = "jrx-group"
		var wg sync.WaitGroup
		var out, stderr string
		var err error
		wg.Add(1)
		go func() {
			defer wg.Done()
			// subscribe(SubscriptionPattern): the broker resolves the regex.
			out, stderr, err = tool(t, cp, "", "dev.sluice.compat.RegexConsume", b.KafkaAddr, group, `jrx\..*`, "5", "60")
		}()
		// Once the member holds jrx.a, create jrx.b.
		dcl := newClient(t, b.KafkaAddr)
		for {
			if ctx.Err() != nil {
				wg.Wait()
				t.Fatalf("the Java member never got jrx.a: %v\n%s", toolErr(err, stderr), out)
			}
			req := kmsg.NewPtrConsumerGroupDescribeRequest()
			req.Groups = []string{group}
			resp, derr := req.RequestWith(ctx, dcl)
			if derr == nil && len(resp.Groups) == 1 && len(resp.Groups[0].Members) == 1 &&
				len(resp.Groups[0].Members[0].Assignment.TopicPartitions) == 1 {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		createTopic(ctx, t, adm, "jrx.b", 1, nil)
		produceN(ctx, t, b.KafkaAddr, "jrx.b", "b", 3)
		wg.Wait()
		if err != nil {
			t.Fatalf("console consumer: %v", toolErr(err, stderr))
		}
		if strings.Count(out, "RECORD jrx.b ") != 3 || strings.Count(out, "RECORD jrx.a ") != 2 || strings.Contains(out, "jother") ||
			!strings.Contains(out, "RESULT OK") {
			t.Fatalf("want 2 records of jrx.a and 3 of jrx.b, none of jother:\n%s", out)
		}
	})
}
