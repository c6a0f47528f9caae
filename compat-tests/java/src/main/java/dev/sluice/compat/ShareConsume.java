package dev.sluice.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Share group consumers (KIP-932, KafkaShareConsumer) for the share group
 * tests.
 *
 * Usage:
 *   ShareConsume BOOTSTRAP TOPIC GROUP consume N PREFIX COUNT SECONDS
 *     N consumers in GROUP (explicit acknowledgement) poll TOPIC, accept
 *     every record and commit after each poll, until COUNT distinct records
 *     whose value starts with PREFIX were accepted, or SECONDS passed. Each
 *     record prints "GOT consumer offset deliveryCount epochMillis value";
 *     a failed acknowledgement commit prints "ACKFAIL consumer error".
 *     Ends with "RESULT OK" (all COUNT seen) or "RESULT FAIL: reason".
 *   ShareConsume BOOTSTRAP TOPIC GROUP hold SECONDS
 *     One consumer polls until it acquires records, prints
 *     "HELD epochMillis offset,offset,..." and then holds them: it never
 *     acknowledges, polls or closes again (the test stops or kills it).
 */
public final class ShareConsume {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], mode = args[3];
        if (mode.equals("hold")) {
            hold(bootstrap, topic, group, Integer.parseInt(args[4]));
            return;
        }
        int n = Integer.parseInt(args[4]);
        String prefix = args[5];
        int count = Integer.parseInt(args[6]);
        long deadline = System.currentTimeMillis() + 1000L * Integer.parseInt(args[7]);
        Map<String, Boolean> seen = new ConcurrentHashMap<>();
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> errors = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            final int idx = i;
            Thread th = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(props(bootstrap, group, "share-" + idx, "explicit"))) {
                    c.subscribe(List.of(topic));
                    while (!stop.get() && System.currentTimeMillis() < deadline) {
                        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(500));
                        for (ConsumerRecord<String, String> r : recs) {
                            Optional<Short> dc = r.deliveryCount();
                            synchronized (System.out) {
                                System.out.println("GOT " + idx + " " + r.offset() + " " + dc.orElse((short) -1) + " "
                                        + System.currentTimeMillis() + " " + r.value());
                            }
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                            if (r.value() != null && r.value().startsWith(prefix)) {
                                seen.put(r.value(), true);
                            }
                        }
                        if (!recs.isEmpty()) {
                            Map<TopicIdPartition, Optional<KafkaException>> res = c.commitSync(Duration.ofSeconds(30));
                            for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : res.entrySet()) {
                                if (e.getValue().isPresent()) {
                                    synchronized (System.out) {
                                        System.out.println("ACKFAIL " + idx + " " + e.getValue().get());
                                    }
                                }
                            }
                            // Leave the partition to the others for a moment,
                            // as a consumer doing work would.
                            Thread.sleep(50);
                        }
                        if (seen.size() >= count) {
                            stop.set(true);
                        }
                    }
                } catch (Throwable t) {
                    synchronized (errors) {
                        errors.add(t);
                    }
                    t.printStackTrace();
                }
            });
            threads.add(th);
            th.start();
        }
        for (Thread th : threads) {
            th.join();
        }
        System.out.flush();
        if (!errors.isEmpty()) {
            System.out.println("RESULT FAIL: " + errors.get(0));
            System.exit(1);
        }
        if (seen.size() < count) {
            System.out.println("RESULT FAIL: accepted " + seen.size() + " of " + count + " records");
            System.exit(1);
        }
        System.out.println("RESULT OK");
    }

    private static void hold(String bootstrap, String topic, String group, int seconds) throws Exception {
        long deadline = System.currentTimeMillis() + 1000L * seconds;
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(props(bootstrap, group, "share-holder", "explicit"));
        c.subscribe(List.of(topic));
        while (System.currentTimeMillis() < deadline) {
            ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(500));
            if (recs.isEmpty()) {
                continue;
            }
            StringBuilder sb = new StringBuilder();
            for (ConsumerRecord<String, String> r : recs) {
                if (sb.length() > 0) {
                    sb.append(',');
                }
                sb.append(r.offset());
            }
            System.out.println("HELD " + System.currentTimeMillis() + " " + sb);
            System.out.flush();
            Thread.sleep(1000L * seconds);
            return;
        }
        System.out.println("RESULT FAIL: acquired nothing");
        System.exit(1);
    }

    private static Properties props(String bootstrap, String group, String clientId, String ackMode) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, ackMode);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
    }
}
