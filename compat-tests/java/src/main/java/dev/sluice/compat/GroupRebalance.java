package dev.sluice.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Three Java consumers share GROUP (group.protocol=PROTOCOL) on TOPIC, which
 * holds TOTAL records; once every consumer owns partitions and a tenth of
 * the records is processed, the first consumer closes and a fourth joins. Each consumer commits what it processed after
 * every poll (commitSync) and, for partitions being revoked, in
 * onPartitionsRevoked, so a partition that moves has nothing processed and
 * uncommitted, and no record may be processed twice or skipped.
 *
 * Usage: GroupRebalance BOOTSTRAP TOPIC GROUP PROTOCOL TOTAL
 *
 * Prints "MEMBER name partitions-ever-assigned", "DISTINCT n",
 * "DUPLICATES n" and a last line "RESULT OK" or "RESULT FAIL: reason".
 */
public final class GroupRebalance {
    static final Map<String, Integer> seen = new ConcurrentHashMap<>();
    static final AtomicReference<String> failure = new AtomicReference<>();

    static final class Member extends Thread {
        final String name;
        final Properties props;
        final String topic;
        final AtomicBoolean stop = new AtomicBoolean();
        final Set<Integer> assigned = ConcurrentHashMap.newKeySet();
        // Set once the last commit is done and close (leaving) begins.
        volatile boolean closing;

        Member(String name, Properties props, String topic) {
            this.name = name;
            this.props = props;
            this.topic = topic;
        }

        @Override
        public void run() {
            Properties p = new Properties();
            p.putAll(props);
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
            // Processed but not yet committed: a commit refused because a
            // rebalance is completing (RebalanceInProgressException, as
            // the Java client documents) is retried after the next poll,
            // and whatever is pending for a partition being revoked is
            // committed in onPartitionsRevoked, before it moves.
            Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        Map<TopicPartition, OffsetAndMetadata> revoked = new HashMap<>();
                        for (TopicPartition tp : parts) {
                            OffsetAndMetadata om = pending.remove(tp);
                            if (om != null) revoked.put(tp, om);
                        }
                        if (!revoked.isEmpty()) c.commitSync(revoked);
                    }
                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        for (TopicPartition tp : parts) assigned.add(tp.partition());
                    }
                    public void onPartitionsLost(Collection<TopicPartition> parts) {
                        // A consumer closing while a rebalance is in
                        // progress (another member left at the same
                        // time) gives its partitions up as lost: the Java
                        // client's onLeavePrepare does so by design, and
                        // nothing is pending then (committed below,
                        // before close). Lost at any other time means
                        // the coordinator dropped the member.
                        if (!closing) {
                            failure.compareAndSet(null, name + ": partitions lost " + parts);
                        }
                    }
                });
                while (!stop.get()) {
                    ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<String, String> r : rs) {
                        seen.merge(r.partition() + ":" + r.offset(), 1, Integer::sum);
                        pending.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    if (!pending.isEmpty()) {
                        try {
                            c.commitSync(pending);
                            pending.clear();
                        } catch (org.apache.kafka.common.errors.RebalanceInProgressException e) {
                            // retried after the next poll
                        }
                    }
                    Thread.sleep(50); // slow enough for the rebalances to land mid-stream
                }
                // Commit what is pending before leaving. The others are
                // leaving too, so a rebalance may be in progress: poll
                // (which rejoins, and commits partitions being revoked
                // in onPartitionsRevoked), process what it returns, and
                // commit again.
                long until = System.currentTimeMillis() + 60_000;
                while (!pending.isEmpty()) {
                    try {
                        c.commitSync(pending);
                        pending.clear();
                    } catch (org.apache.kafka.common.errors.RebalanceInProgressException e) {
                        if (System.currentTimeMillis() > until) throw e;
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                            seen.merge(r.partition() + ":" + r.offset(), 1, Integer::sum);
                            pending.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                        }
                    }
                }
                closing = true;
            } catch (Exception e) {
                e.printStackTrace();
                failure.compareAndSet(null, name + ": " + e);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.out.println("RESULT FAIL: usage: GroupRebalance BOOTSTRAP TOPIC GROUP PROTOCOL TOTAL");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1], group = args[2], protocol = args[3];
        int total = Integer.parseInt(args[4]);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
        }
        List<Member> members = new ArrayList<>();
        for (int i = 1; i <= 3; i++) {
            Member m = new Member("m" + i, p, topic);
            members.add(m);
            m.start();
        }
        long deadline = System.currentTimeMillis() + 180_000;
        // m1 leaves once every member owns partitions (so partitions
        // move) and a tenth of the records are processed.
        while ((seen.size() < total / 10 || members.stream().anyMatch(m -> m.assigned.isEmpty()))
                && System.currentTimeMillis() < deadline && failure.get() == null) {
            Thread.sleep(20);
        }
        if (members.stream().anyMatch(m -> m.assigned.isEmpty())) {
            failure.compareAndSet(null, "not every member got partitions before the deadline");
        }
        // m1 leaves, m4 joins.
        members.get(0).stop.set(true);
        members.get(0).join();
        Member m4 = new Member("m4", p, topic);
        members.add(m4);
        m4.start();
        while (seen.size() < total && System.currentTimeMillis() < deadline && failure.get() == null) {
            Thread.sleep(20);
        }
        for (Member m : members) {
            m.stop.set(true);
        }
        for (Member m : members) {
            m.join();
        }
        int dups = 0;
        for (Map.Entry<String, Integer> e : seen.entrySet()) {
            if (e.getValue() != 1) {
                dups++;
                System.out.println("DUPLICATE " + e.getKey() + " x" + e.getValue());
            }
        }
        for (Member m : members) {
            System.out.println("MEMBER " + m.name + " " + new java.util.TreeSet<>(m.assigned));
        }
        System.out.println("DISTINCT " + seen.size());
        System.out.println("DUPLICATES " + dups);
        String f = failure.get();
        if (f == null && seen.size() != total) {
            f = "processed " + seen.size() + " distinct records of " + total;
        }
        if (f == null && dups > 0) {
            f = dups + " records processed more than once";
        }
        if (f == null && m4.assigned.isEmpty()) {
            f = "the member that joined late never got a partition";
        }
        if (f == null) {
            System.out.println("RESULT OK");
            System.exit(0);
        }
        System.out.println("RESULT FAIL: " + f);
        System.exit(1);
    }
}
