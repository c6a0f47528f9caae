package dev.sluice.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Creates TOPIC with PARTITIONS partitions through the Java Admin client,
 * produces N records with the Java producer's default settings (idempotence on,
 * acks=all), then reads the topic back from the beginning with a group-less
 * consumer (assign + seekToBeginning) and checks every record: exact key, value
 * and headers, each produced record exactly once, at the offset the producer was
 * told, in per-partition order.
 *
 * Usage: ProduceConsume BOOTSTRAP TOPIC PARTITIONS N
 *
 * The topic must not exist. Prints "CREATED topic partitions", "PRODUCED n", "CONSUMED n" and a last
 * line "RESULT OK" (exit 0) or "RESULT FAIL: reason" (exit 1). One JVM does both
 * halves because JVM start-up dominates the run time.
 */
public final class ProduceConsume {
    private static final Duration CONSUME_DEADLINE = Duration.ofSeconds(90);

    public static void main(String[] args) {
        if (args.length != 4) {
            System.out.println("RESULT FAIL: usage: ProduceConsume BOOTSTRAP TOPIC PARTITIONS N");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int n = Integer.parseInt(args[3]);
        try {
            String failure = create(bootstrap, topic, partitions);
            if (failure == null) {
                failure = run(bootstrap, topic, n);
            }
            if (failure == null) {
                System.out.println("RESULT OK");
                System.exit(0);
            }
            System.out.println("RESULT FAIL: " + failure);
        } catch (Throwable t) {
            t.printStackTrace(System.err);
            System.out.println("RESULT FAIL: " + t);
        }
        System.exit(1);
    }

    static String key(int i) { return "java-key-" + i; }
    static String value(int i) { return "java-value-" + i + "-" + Integer.toHexString(i * 31 + 7); }

    /** Creates the topic with the Admin client (CreateTopics goes to the controller) and describes it. */
    private static String create(String bootstrap, String topic, int partitions) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(AdminClientConfig.CLIENT_ID_CONFIG, "sluice-compat-java-admin");
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            if (d == null || d.partitions().size() != partitions) {
                return "describeTopics(" + topic + ") after createTopics: " + d;
            }
            for (var p : d.partitions()) {
                if (p.leader() == null || p.leader().isEmpty()) {
                    return "describeTopics(" + topic + "): partition " + p.partition() + " has no leader";
                }
            }
        }
        System.out.println("CREATED " + topic + " " + partitions);
        return null;
    }

    private static String run(String bootstrap, String topic, int n) throws Exception {
        // 1. Produce with default settings: only the bootstrap and the serializers are set.
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.CLIENT_ID_CONFIG, "sluice-compat-java-producer");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

        List<Future<RecordMetadata>> futures = new ArrayList<>(n);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < n; i++) {
                ProducerRecord<String, String> rec = new ProducerRecord<>(topic, key(i), value(i));
                rec.headers().add("idx", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                rec.headers().add("src", "java".getBytes(StandardCharsets.UTF_8));
                futures.add(producer.send(rec));
            }
            producer.flush();
        }
        // Where each record landed, keyed by "partition/offset".
        Map<String, Integer> byPosition = new HashMap<>(n * 2);
        Map<Integer, Long> lastOffset = new HashMap<>();
        for (int i = 0; i < n; i++) {
            RecordMetadata md;
            try {
                md = futures.get(i).get();
            } catch (Exception e) {
                return "record " + i + " was not acknowledged: " + e;
            }
            String pos = md.partition() + "/" + md.offset();
            Integer prev = byPosition.put(pos, i);
            if (prev != null) {
                return "records " + prev + " and " + i + " were both acknowledged at " + pos;
            }
            Long lo = lastOffset.get(md.partition());
            if (lo != null && md.offset() <= lo) {
                return "record " + i + " acknowledged at " + pos + " after offset " + lo + " in the same partition";
            }
            lastOffset.put(md.partition(), md.offset());
        }
        System.out.println("PRODUCED " + n);

        // 2. Consume without a group: assign every partition and start at the beginning.
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "sluice-compat-java-consumer");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");

        boolean[] seen = new boolean[n];
        int consumed = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(30));
            if (infos == null || infos.isEmpty()) {
                return "partitionsFor(" + topic + ") returned no partitions";
            }
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : infos) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(30));
            long total = 0;
            for (TopicPartition tp : tps) {
                total += end.get(tp);
            }
            if (total != n) {
                return "end offsets " + end + " add up to " + total + ", want " + n;
            }

            Map<Integer, Long> prevOffset = new HashMap<>();
            long deadline = System.nanoTime() + CONSUME_DEADLINE.toNanos();
            while (consumed < n) {
                if (System.nanoTime() > deadline) {
                    return "consumed only " + consumed + " of " + n + " records within " + CONSUME_DEADLINE;
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    String pos = r.partition() + "/" + r.offset();
                    Integer i = byPosition.get(pos);
                    if (i == null) {
                        return "consumed a record at " + pos + " that no acknowledgement named (key " + r.key() + ")";
                    }
                    if (seen[i]) {
                        return "record " + i + " consumed twice (at " + pos + ")";
                    }
                    seen[i] = true;
                    Long po = prevOffset.get(r.partition());
                    if (po != null && r.offset() <= po) {
                        return "partition " + r.partition() + ": offset " + r.offset() + " after " + po;
                    }
                    prevOffset.put(r.partition(), r.offset());
                    if (!key(i).equals(r.key()) || !value(i).equals(r.value())) {
                        return "record " + i + " at " + pos + ": got key=" + r.key() + " value=" + r.value()
                            + ", want key=" + key(i) + " value=" + value(i);
                    }
                    String hs = headers(r);
                    String want = "idx=" + i + ",src=java";
                    if (!want.equals(hs)) {
                        return "record " + i + " at " + pos + ": headers " + hs + ", want " + want;
                    }
                    consumed++;
                }
            }
            // Anything past the end offsets would be an extra record.
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(300))) {
                return "extra record at " + r.partition() + "/" + r.offset() + " after all " + n + " were consumed";
            }
        }
        System.out.println("CONSUMED " + consumed);
        return null;
    }

    private static String headers(ConsumerRecord<String, String> r) {
        StringBuilder sb = new StringBuilder();
        for (Header h : r.headers()) {
            if (sb.length() > 0) {
                sb.append(',');
            }
            sb.append(h.key()).append('=').append(h.value() == null ? "<null>" : new String(h.value(), StandardCharsets.UTF_8));
        }
        return sb.toString();
    }
}
