package dev.sluice.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The basic, transaction, admin and group scenarios of the compat matrix (docs/compat.md) with
 * the Java client library (kafka-clients: KafkaProducer, KafkaConsumer,
 * Admin), all in one JVM so that the matrix pays for one JVM start. The Go
 * side (../java_matrix_test.go) creates the topics of the basic group first
 * (PREFIX-meta with 3 partitions; PREFIX-acks0, -acks1, -acksall, -idem,
 * -fields, -cons with 1; PREFIX-big with max.message.bytes=100000; 10
 * records c-0..c-9 in PREFIX-cons, timestamps BASE+i*1000; PREFIX-grp with
 * 4 partitions of 10 records; PREFIX-txn, -txo-in with i-0..i-9, -txo-out and -txf
 * with 1) and checks what the producers wrote afterwards.
 *
 * Usage: Matrix BOOTSTRAP PREFIX
 *
 * Prints "VERSION ..." and one "RESULT scenario pass|fail detail" line per
 * scenario. Errors are checked by their exact Kafka error code.
 */
public final class Matrix {
    static final long TS_BASE = 1_700_000_000_000L;

    static String bootstrap;
    static String prefix;

    interface Scenario {
        void run() throws Exception;
    }

    static void scenario(String name, Scenario s) {
        String result = "pass", detail = "";
        try {
            s.run();
        } catch (Throwable e) {
            result = "fail";
            detail = e.toString().replace('\n', ' ');
            e.printStackTrace();
        }
        System.out.println("RESULT " + name + " " + result + (detail.isEmpty() ? "" : " " + detail));
        System.out.flush();
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new IllegalStateException(what);
    }

    /** The Kafka error code behind an exception, unwrapping ExecutionException. */
    static short code(Throwable e) {
        if (e instanceof ExecutionException && e.getCause() != null) e = e.getCause();
        return Errors.forException(e).code();
    }

    static Properties common() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "sluice-compat-java-matrix");
        return p;
    }

    static KafkaProducer<byte[], byte[]> producer(String acks, boolean idempotent) {
        Properties p = common();
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(idempotent));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static KafkaProducer<byte[], byte[]> transactional(String id) {
        Properties p = common();
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<byte[], byte[]> consumer() {
        return consumer("read_uncommitted");
    }

    static KafkaConsumer<byte[], byte[]> consumer(String isolation) {
        Properties p = common();
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    /** Reads n records of partition 0 of topic from offset (-2: earliest). */
    static List<ConsumerRecord<byte[], byte[]>> read(String topic, long offset, int n) {
        return read(topic, offset, n, "read_uncommitted");
    }

    static List<ConsumerRecord<byte[], byte[]>> read(String topic, long offset, int n, String isolation) {
        TopicPartition tp = new TopicPartition(topic, 0);
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(isolation)) {
            c.assign(List.of(tp));
            if (offset < 0) c.seekToBeginning(List.of(tp));
            else c.seek(tp, offset);
            long deadline = System.currentTimeMillis() + 20_000;
            while (out.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) out.add(r);
            }
        }
        check(out.size() >= n, topic + ": read " + out.size() + " of " + n + " records in 20 s");
        return out.subList(0, n);
    }

    static byte[] b(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    static String s(byte[] b) {
        return b == null ? "<null>" : new String(b, StandardCharsets.UTF_8);
    }

    static void produceHundred(String topic, String acks, boolean idempotent) throws Exception {
        try (KafkaProducer<byte[], byte[]> pr = producer(acks, idempotent)) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < 100; i++) {
                fs.add(pr.send(new ProducerRecord<>(topic, 0, b("k" + i), b(topic + "-" + i))));
            }
            pr.flush();
            for (Future<RecordMetadata> f : fs) f.get(30, TimeUnit.SECONDS);
        }
    }

    static void basic(Admin adm) {
        String meta = prefix + "-meta", fields = prefix + "-fields", big = prefix + "-big", cons = prefix + "-cons";
        scenario("bootstrap-metadata", () -> {
            Collection<Node> nodes = adm.describeCluster().nodes().get(30, TimeUnit.SECONDS);
            check(nodes.size() == 1, "describeCluster lists " + nodes);
            TopicDescription d = adm.describeTopics(List.of(meta)).allTopicNames().get(30, TimeUnit.SECONDS).get(meta);
            check(d.partitions().size() == 3, meta + " has " + d.partitions().size() + " partitions, want 3");
            // The producer's own Metadata path as well.
            try (KafkaProducer<byte[], byte[]> pr = producer("all", false)) {
                int n = pr.partitionsFor(meta).size();
                check(n == 3, "producer partitionsFor " + meta + ": " + n);
            }
        });
        scenario("produce-acks0", () -> produceHundred(prefix + "-acks0", "0", false));
        scenario("produce-acks1", () -> produceHundred(prefix + "-acks1", "1", false));
        scenario("produce-acksall", () -> produceHundred(prefix + "-acksall", "all", false));
        scenario("produce-idempotent", () -> produceHundred(prefix + "-idem", "all", true));
        scenario("keys-nulls-headers-timestamps", () -> {
            try (KafkaProducer<byte[], byte[]> pr = producer("all", false)) {
                pr.send(new ProducerRecord<>(fields, 0, TS_BASE, b("k1"), b("v1"),
                    List.of(new RecordHeader("h1", b("a")), new RecordHeader("h2", b("b")))));
                pr.send(new ProducerRecord<byte[], byte[]>(fields, 0, TS_BASE + 1, b("k2"), (byte[]) null));
                pr.send(new ProducerRecord<>(fields, 0, TS_BASE + 2, null, b("v3"),
                    List.of(new RecordHeader("h3", new byte[0])))).get(30, TimeUnit.SECONDS);
            }
            String[][] want = {{"k1", "v1", "h1=a,h2=b"}, {"k2", null, ""}, {null, "v3", "h3="}};
            List<ConsumerRecord<byte[], byte[]>> got = read(fields, -2, 3);
            for (int i = 0; i < 3; i++) {
                ConsumerRecord<byte[], byte[]> r = got.get(i);
                List<String> hs = new ArrayList<>();
                for (Header h : r.headers()) {
                    check(h.value() != null, "record " + i + " header " + h.key() + " has a null value, want empty");
                    hs.add(h.key() + "=" + s(h.value()));
                }
                String[] w = want[i];
                boolean ok = r.offset() == i
                    && Arrays.equals(r.key(), b(w[0])) && Arrays.equals(r.value(), b(w[1]))
                    && String.join(",", hs).equals(w[2])
                    && r.timestamp() == TS_BASE + i && r.timestampType() == TimestampType.CREATE_TIME;
                check(ok, "record " + i + ": offset " + r.offset() + " key " + s(r.key()) + " value " + s(r.value())
                    + " headers " + hs + " ts " + r.timestamp() + " " + r.timestampType());
            }
        });
        scenario("near-max-message-bytes", () -> {
            String v = "n".repeat(99_000);
            try (KafkaProducer<byte[], byte[]> pr = producer("all", false)) {
                RecordMetadata md = pr.send(new ProducerRecord<>(big, 0, b("near"), b(v))).get(30, TimeUnit.SECONDS);
                check(md.offset() == 0, "stored at offset " + md.offset() + ", want 0");
            }
            ConsumerRecord<byte[], byte[]> r = read(big, -2, 1).get(0);
            check(s(r.key()).equals("near") && s(r.value()).equals(v), "read back key " + s(r.key()) + " and " + r.value().length + " bytes");
        });
        scenario("error-record-too-large", () -> {
            // 101,000 bytes is under the producer's max.request.size (1 MiB),
            // so the refusal can only come from the broker.
            try (KafkaProducer<byte[], byte[]> pr = producer("all", false)) {
                pr.send(new ProducerRecord<>(big, 0, b("over"), b("o".repeat(101_000)))).get(30, TimeUnit.SECONDS);
                throw new IllegalStateException("101,000 bytes over max.message.bytes=100000 were accepted");
            } catch (ExecutionException e) {
                check(code(e) == Errors.MESSAGE_TOO_LARGE.code(),
                    "error code " + code(e) + " (" + e.getCause() + "), want MESSAGE_TOO_LARGE (10)");
            }
            try (KafkaConsumer<byte[], byte[]> c = consumer()) {
                TopicPartition tp = new TopicPartition(big, 0);
                long end = c.endOffsets(List.of(tp), Duration.ofSeconds(20)).get(tp);
                check(end == 1, big + " ends at " + end + ", want 1 (only the near-max record)");
            }
        });
        scenario("consume-earliest", () -> {
            List<ConsumerRecord<byte[], byte[]>> got = read(cons, -2, 10);
            for (int i = 0; i < 10; i++) {
                ConsumerRecord<byte[], byte[]> r = got.get(i);
                check(r.offset() == i && s(r.value()).equals("c-" + i) && r.key() == null && r.timestamp() == TS_BASE + i * 1000L,
                    "record " + i + ": offset " + r.offset() + " value " + s(r.value()) + " ts " + r.timestamp());
            }
        });
        scenario("consume-latest", () -> {
            TopicPartition tp = new TopicPartition(cons, 0);
            try (KafkaConsumer<byte[], byte[]> c = consumer()) {
                c.assign(List.of(tp));
                c.seekToEnd(List.of(tp));
                long pos = c.position(tp, Duration.ofSeconds(20)); // resolves "latest" (ListOffsets) now
                check(pos == 10, "latest offset " + pos + ", want 10");
                try (KafkaProducer<byte[], byte[]> pr = producer("all", false)) {
                    pr.send(new ProducerRecord<>(cons, 0, null, b("after-latest"))).get(30, TimeUnit.SECONDS);
                }
                List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 20_000;
                while (got.isEmpty() && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) got.add(r);
                }
                check(got.size() == 1 && got.get(0).offset() == 10 && s(got.get(0).value()).equals("after-latest"),
                    "read " + got.size() + " records" + (got.isEmpty() ? "" : ", first at " + got.get(0).offset() + ": " + s(got.get(0).value())));
            }
        });
        scenario("consume-timestamp", () -> {
            TopicPartition tp = new TopicPartition(cons, 0);
            try (KafkaConsumer<byte[], byte[]> c = consumer()) {
                Map<TopicPartition, OffsetAndTimestamp> m = c.offsetsForTimes(Map.of(tp, TS_BASE + 4500), Duration.ofSeconds(20));
                OffsetAndTimestamp ot = m.get(tp);
                check(ot != null && ot.offset() == 5 && ot.timestamp() == TS_BASE + 5000,
                    "offset for timestamp base+4500: " + ot + ", want offset 5 at base+5000");
            }
            List<ConsumerRecord<byte[], byte[]>> got = read(cons, 5, 3);
            for (int i = 0; i < 3; i++) {
                check(got.get(i).offset() == 5 + i && s(got.get(i).value()).equals("c-" + (5 + i)),
                    "read from 5: offset " + got.get(i).offset() + " " + s(got.get(i).value()));
            }
        });
        scenario("error-unknown-topic", () -> {
            // Admin.describeTopics asks Metadata for the topic (Sluice does
            // not advertise DescribeTopicPartitions, so the client falls back).
            String missing = prefix + "-no-such-topic";
            try {
                adm.describeTopics(List.of(missing)).allTopicNames().get(30, TimeUnit.SECONDS);
                throw new IllegalStateException("describing " + missing + " succeeded");
            } catch (ExecutionException e) {
                check(code(e) == Errors.UNKNOWN_TOPIC_OR_PARTITION.code(),
                    "error code " + code(e) + " (" + e.getCause() + "), want UNKNOWN_TOPIC_OR_PARTITION (3)");
            }
            check(!adm.listTopics().names().get(30, TimeUnit.SECONDS).contains(missing), missing + " was created");
        });
    }

    /**
     * txn-commit-abort on PREFIX-txn (1 partition, created by the Go side):
     * a transactional KafkaProducer commits c-0..c-4, aborts a-0..a-4 (sent
     * and flushed first, so they reach the log) and commits c-5..c-9; a
     * read_committed consumer reads exactly c-0..c-9.
     */
    static void transactions() {
        String topic = prefix + "-txn";
        scenario("txn-commit-abort", () -> {
            Properties p = common();
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, topic + "-tid");
            p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
            p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            List<String> want = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> pr = new KafkaProducer<>(p)) {
                pr.initTransactions();
                boolean[] commits = {true, false, true};
                for (int i = 0; i < commits.length; i++) {
                    pr.beginTransaction();
                    List<Future<RecordMetadata>> fs = new ArrayList<>();
                    for (int j = 0; j < 5; j++) {
                        String v = commits[i] ? "c-" + (5 * (i / 2) + j) : "a-" + j;
                        if (commits[i]) want.add(v);
                        fs.add(pr.send(new ProducerRecord<>(topic, 0, null, b(v))));
                    }
                    pr.flush();
                    for (Future<RecordMetadata> f : fs) f.get(30, TimeUnit.SECONDS);
                    if (commits[i]) pr.commitTransaction();
                    else pr.abortTransaction();
                }
            }
            List<String> got = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : read(topic, -2, want.size(), "read_committed")) got.add(s(r.value()));
            check(got.equals(want), "read_committed read " + got + ", want c-0..c-9");
        });

        /*
         * txn-offsets (the Go side's prepareTxn): a consumer of group
         * PREFIX-txo-g (assigned partition 0 of PREFIX-txo-in, not
         * subscribed, so its group metadata has generation -1) reads
         * i-0..i-9; the transactional producer writes o-0..o-4 to
         * PREFIX-txo-out, sends offset 5 with sendOffsetsToTransaction and
         * commits, then o-5..o-9 with offset 10 and aborts. The consumer's
         * committed() offset is then 5 and a read_committed consumer reads
         * o-0..o-4.
         */
        scenario("txn-offsets", () -> {
            String in = prefix + "-txo-in", out = prefix + "-txo-out", group = prefix + "-txo-g";
            TopicPartition tp = new TopicPartition(in, 0);
            Properties cp = common();
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp);
                 KafkaProducer<byte[], byte[]> pr = transactional(prefix + "-txo-tid")) {
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                List<ConsumerRecord<byte[], byte[]>> input = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 20_000;
                while (input.size() < 10 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) input.add(r);
                }
                check(input.size() == 10, in + ": read " + input.size() + " of 10 records in 20 s");
                pr.initTransactions();
                boolean[] commits = {true, false};
                for (int i = 0; i < commits.length; i++) {
                    pr.beginTransaction();
                    List<Future<RecordMetadata>> fs = new ArrayList<>();
                    for (ConsumerRecord<byte[], byte[]> r : input.subList(5 * i, 5 * i + 5)) {
                        fs.add(pr.send(new ProducerRecord<>(out, 0, null, b(s(r.value()).replace("i-", "o-")))));
                    }
                    pr.flush();
                    for (Future<RecordMetadata> f : fs) f.get(30, TimeUnit.SECONDS);
                    long next = input.get(5 * i + 4).offset() + 1;
                    pr.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(next)), c.groupMetadata());
                    if (commits[i]) pr.commitTransaction();
                    else pr.abortTransaction();
                }
                OffsetAndMetadata committed = c.committed(Set.of(tp), Duration.ofSeconds(20)).get(tp);
                check(committed != null && committed.offset() == 5, "committed offset of " + tp + ": " + committed + ", want 5");
            }
            List<String> got = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : read(out, -2, 5, "read_committed")) got.add(s(r.value()));
            check(got.equals(List.of("o-0", "o-1", "o-2", "o-3", "o-4")), "read_committed read " + got + ", want o-0..o-4");
        });

        /*
         * txn-fencing (prepareTxn): producer A (PREFIX-txf-tid) writes
         * f-a-0 in an open transaction; B initializes with the same
         * transactional id, fencing A; A's commitTransaction throws
         * ProducerFencedException (PRODUCER_FENCED); B writes f-b-0 and
         * commits; read_committed reads f-b-0 only.
         */
        scenario("txn-fencing", () -> {
            String t = prefix + "-txf";
            try (KafkaProducer<byte[], byte[]> a = transactional(prefix + "-txf-tid");
                 KafkaProducer<byte[], byte[]> bp = transactional(prefix + "-txf-tid")) {
                a.initTransactions();
                a.beginTransaction();
                a.send(new ProducerRecord<>(t, 0, null, b("f-a-0"))).get(30, TimeUnit.SECONDS);
                bp.initTransactions();
                Throwable err = null;
                try {
                    a.commitTransaction();
                } catch (Exception e) {
                    err = e;
                }
                check(err instanceof ProducerFencedException,
                    "A's commit after B initialized: " + err + ", want ProducerFencedException (PRODUCER_FENCED)");
                bp.beginTransaction();
                bp.send(new ProducerRecord<>(t, 0, null, b("f-b-0"))).get(30, TimeUnit.SECONDS);
                bp.commitTransaction();
            }
            List<String> got = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : read(t, -2, 1, "read_committed")) got.add(s(r.value()));
            check(got.equals(List.of("f-b-0")), "read_committed read " + got + ", want f-b-0");
        });
    }

    static Map<String, ConfigEntry> describe(Admin adm, String topic) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config cfg = adm.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res);
        Map<String, ConfigEntry> out = new java.util.HashMap<>();
        for (ConfigEntry e : cfg.entries()) out.put(e.name(), e);
        return out;
    }

    static void partitions(Admin adm, String topic, int want) throws Exception {
        long deadline = System.currentTimeMillis() + 10_000;
        int n = -1;
        while (System.currentTimeMillis() < deadline) {
            n = adm.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic).partitions().size();
            if (n == want) return;
            Thread.sleep(200);
        }
        throw new IllegalStateException(topic + " has " + n + " partitions, want " + want);
    }

    static void admin(Admin adm) {
        String tp = prefix + "-adm";
        scenario("admin-create", () -> {
            adm.createTopics(List.of(new NewTopic(tp, 2, (short) 1).configs(Map.of("retention.ms", "3600000"))))
                .all().get(30, TimeUnit.SECONDS);
            partitions(adm, tp, 2);
            try {
                adm.createTopics(List.of(new NewTopic(tp, 2, (short) 1))).all().get(30, TimeUnit.SECONDS);
                throw new IllegalStateException("creating " + tp + " again succeeded");
            } catch (ExecutionException e) {
                check(code(e) == Errors.TOPIC_ALREADY_EXISTS.code(),
                    "create again: error code " + code(e) + " (" + e.getCause() + "), want TOPIC_ALREADY_EXISTS (36)");
            }
        });
        scenario("admin-describe-configs", () -> {
            Map<String, ConfigEntry> cfg = describe(adm, tp);
            ConfigEntry ret = cfg.get("retention.ms");
            check(ret != null && "3600000".equals(ret.value()) && ret.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                "retention.ms: " + ret + ", want 3600000 from DYNAMIC_TOPIC_CONFIG");
            ConfigEntry cp = cfg.get("cleanup.policy");
            check(cp != null && "delete".equals(cp.value()) && cp.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                "cleanup.policy: " + cp + ", want the default delete (" + cfg.size() + " entries)");
            ConfigEntry mmb = cfg.get("max.message.bytes");
            check(mmb != null && mmb.value() != null && !mmb.value().isEmpty(), "no max.message.bytes default: " + mmb);
        });
        scenario("admin-alter-configs", () -> {
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, tp);
            adm.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET))))
                .all().get(30, TimeUnit.SECONDS);
            ConfigEntry ret = describe(adm, tp).get("retention.ms");
            check(ret != null && "7200000".equals(ret.value()), "after alter retention.ms: " + ret);
        });
        scenario("admin-create-partitions", () -> {
            adm.createPartitions(Map.of(tp, NewPartitions.increaseTo(4))).all().get(30, TimeUnit.SECONDS);
            partitions(adm, tp, 4);
        });
        scenario("admin-delete", () -> {
            adm.deleteTopics(List.of(tp)).all().get(30, TimeUnit.SECONDS);
            long deadline = System.currentTimeMillis() + 10_000;
            Set<String> names = adm.listTopics().names().get(30, TimeUnit.SECONDS);
            while (names.contains(tp) && System.currentTimeMillis() < deadline) {
                Thread.sleep(200);
                names = adm.listTopics().names().get(30, TimeUnit.SECONDS);
            }
            check(!names.contains(tp), tp + " is still listed after delete");
        });
        scenario("error-bad-config", () -> {
            String bad = prefix + "-bad";
            try {
                adm.createTopics(List.of(new NewTopic(bad, 1, (short) 1).configs(Map.of("retention.ms", "soon"))))
                    .all().get(30, TimeUnit.SECONDS);
                throw new IllegalStateException("creating " + bad + " with retention.ms=soon succeeded");
            } catch (ExecutionException e) {
                check(code(e) == Errors.INVALID_CONFIG.code(),
                    "error code " + code(e) + " (" + e.getCause() + "), want INVALID_CONFIG (40)");
            }
            check(!adm.listTopics().names().get(30, TimeUnit.SECONDS).contains(bad), bad + " was created anyway");
        });
    }

    /** A classic-protocol group member with the range assignor. */
    static KafkaConsumer<byte[], byte[]> member(String group) {
        Properties p = common();
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static List<Integer> assigned(KafkaConsumer<byte[], byte[]> c) {
        List<Integer> ps = new ArrayList<>();
        for (TopicPartition tp : c.assignment()) ps.add(tp.partition());
        Collections.sort(ps);
        return ps;
    }

    static String state(String name, KafkaConsumer<byte[], byte[]> c) {
        return name + " generation " + c.groupMetadata().generationId() + " holds " + assigned(c);
    }

    /** Scenarios on PREFIX-grp: 4 partitions, 10 records g-* in each (written by the Go test). */
    static void groups() {
        String topic = prefix + "-grp";
        List<Integer> all = List.of(0, 1, 2, 3);
        scenario("group-commit-resume", () -> {
            String g = prefix + "-g1";
            Set<String> first = new HashSet<>();
            try (KafkaConsumer<byte[], byte[]> m = member(g)) {
                m.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 30_000;
                while (first.size() < 40 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : m.poll(Duration.ofMillis(200))) first.add(s(r.value()));
                }
                check(first.size() == 40, "the first member read " + first.size() + " distinct records of 40");
                m.commitSync(Duration.ofSeconds(20));
            }
            try (KafkaProducer<byte[], byte[]> pr = producer("all", false)) {
                for (int i = 0; i < 4; i++) pr.send(new ProducerRecord<>(topic, i, b("k"), b("after-" + i)));
                pr.flush();
            }
            List<String> got = new ArrayList<>();
            try (KafkaConsumer<byte[], byte[]> m = member(g)) {
                m.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 30_000;
                while (got.size() < 4 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : m.poll(Duration.ofMillis(200))) got.add(s(r.value()));
                }
                long end = System.currentTimeMillis() + 1_500; // nothing older may follow
                while (System.currentTimeMillis() < end) {
                    for (ConsumerRecord<byte[], byte[]> r : m.poll(Duration.ofMillis(200))) got.add(s(r.value()));
                }
            }
            Collections.sort(got);
            check(got.equals(List.of("after-0", "after-1", "after-2", "after-3")), "the new member read " + got);
        });
        scenario("group-rebalance", () -> {
            String g = prefix + "-g2";
            try (KafkaConsumer<byte[], byte[]> a = member(g)) {
                a.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 60_000;
                while (!assigned(a).equals(all) && System.currentTimeMillis() < deadline) a.poll(Duration.ofMillis(200));
                check(assigned(a).equals(all), "the only member: " + state("a", a));
                System.out.println("STEP group-rebalance alone: " + state("a", a));
                int g1 = a.groupMetadata().generationId();
                int g2;
                try (KafkaConsumer<byte[], byte[]> b = member(g)) {
                    b.subscribe(List.of(topic));
                    deadline = System.currentTimeMillis() + 60_000;
                    while (System.currentTimeMillis() < deadline) {
                        a.poll(Duration.ofMillis(100));
                        b.poll(Duration.ofMillis(100));
                        List<Integer> u = new ArrayList<>(assigned(a));
                        u.addAll(assigned(b));
                        Collections.sort(u);
                        if (a.groupMetadata().generationId() > g1 && a.groupMetadata().generationId() == b.groupMetadata().generationId()
                                && assigned(a).size() == 2 && assigned(b).size() == 2 && u.equals(all)) {
                            break;
                        }
                    }
                    List<Integer> u = new ArrayList<>(assigned(a));
                    u.addAll(assigned(b));
                    Collections.sort(u);
                    g2 = a.groupMetadata().generationId();
                    check(g2 > g1 && g2 == b.groupMetadata().generationId() && assigned(a).size() == 2 && assigned(b).size() == 2 && u.equals(all),
                        "after a second member joined: " + state("a", a) + "; " + state("b", b));
                    System.out.println("STEP group-rebalance joined: " + state("a", a) + "; " + state("b", b));
                } // b leaves the group (LeaveGroup) as it closes
                deadline = System.currentTimeMillis() + 60_000;
                while (!(a.groupMetadata().generationId() > g2 && assigned(a).equals(all)) && System.currentTimeMillis() < deadline) {
                    a.poll(Duration.ofMillis(200));
                }
                check(a.groupMetadata().generationId() > g2 && assigned(a).equals(all), "after the second member left: " + state("a", a));
                System.out.println("STEP group-rebalance left: " + state("a", a));
            }
        });
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.out.println("usage: Matrix BOOTSTRAP PREFIX");
            System.exit(2);
        }
        bootstrap = args[0];
        prefix = args[1];
        System.out.println("VERSION kafka-clients " + org.apache.kafka.common.utils.internals.AppInfoParser.getVersion());
        try (Admin adm = Admin.create(common())) {
            basic(adm);
            transactions();
            admin(adm);
        }
        groups();
    }
}
