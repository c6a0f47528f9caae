package dev.sluice.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A group consumer for the group tests: subscribes to TOPIC in GROUP with
 * group.protocol=PROTOCOL (classic or consumer), processes exactly COUNT
 * records, commits exactly what it processed (commitSync with explicit
 * offsets, after processing), and closes (leaving the group).
 *
 * Usage: GroupConsume BOOTSTRAP TOPIC GROUP PROTOCOL COUNT
 *
 * Prints "ASSIGNED p,p,..." on each assignment, "FIRST partition offset" for
 * the first record it sees of each partition, "CONSUMED n" and a last line
 * "RESULT OK" (exit 0) or "RESULT FAIL: reason" (exit 1).
 */
public final class GroupConsume {
    private static final Duration DEADLINE = Duration.ofSeconds(120);

    public static void main(String[] args) {
        if (args.length != 5) {
            System.out.println("RESULT FAIL: usage: GroupConsume BOOTSTRAP TOPIC GROUP PROTOCOL COUNT");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1], group = args[2], protocol = args[3];
        int count = Integer.parseInt(args[4]);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-group-" + protocol);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        String failure = null;
        Map<Integer, Long> first = new TreeMap<>();
        int consumed = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {}
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    List<Integer> ps = new ArrayList<>();
                    for (TopicPartition tp : parts) ps.add(tp.partition());
                    ps.sort(null);
                    System.out.println("ASSIGNED " + ps);
                }
            });
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (consumed < count) {
                if (System.nanoTime() > deadline) {
                    failure = "consumed " + consumed + " of " + count + " before the deadline";
                    break;
                }
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                for (ConsumerRecord<String, String> r : rs) {
                    if (consumed == count) {
                        break;
                    }
                    first.putIfAbsent(r.partition(), r.offset());
                    consumed++;
                    commit.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                if (!commit.isEmpty()) {
                    c.commitSync(commit);
                }
                if (consumed == count) {
                    break;
                }
                // Rewind what this poll fetched but we did not process.
                for (TopicPartition tp : rs.partitions()) {
                    OffsetAndMetadata om = commit.get(tp);
                    List<ConsumerRecord<String, String>> prs = rs.records(tp);
                    long next = om != null ? om.offset() : prs.get(0).offset();
                    if (next <= prs.get(prs.size() - 1).offset()) {
                        c.seek(tp, next);
                    }
                }
            }
        } catch (Exception e) {
            failure = e.toString();
            e.printStackTrace();
        }
        for (Map.Entry<Integer, Long> e : first.entrySet()) {
            System.out.println("FIRST " + e.getKey() + " " + e.getValue());
        }
        System.out.println("CONSUMED " + consumed);
        if (failure == null) {
            System.out.println("RESULT OK");
            System.exit(0);
        }
        System.out.println("RESULT FAIL: " + failure);
        System.exit(1);
    }
}
