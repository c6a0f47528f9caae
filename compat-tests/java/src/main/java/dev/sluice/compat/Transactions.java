package dev.sluice.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transactions with the Java client: a consume-transform-produce loop with a
 * transactional producer and a read_committed consumer in group GROUP, whose
 * offsets go into the transaction (sendOffsetsToTransaction). The first round
 * over the N input records is aborted, the second committed. Then a
 * read_committed consumer of OUT must see exactly the N committed records and
 * a read_uncommitted one the N aborted ones as well; the group's committed
 * offsets must add up to N; and a second producer with the same
 * transactional.id must fence the first.
 *
 * Usage: Transactions BOOTSTRAP IN OUT GROUP N
 *
 * Prints "CTP OK", "READ_COMMITTED n", "READ_UNCOMMITTED n", "OFFSETS n",
 * "FENCED" and a last line "RESULT OK" (exit 0) or "RESULT FAIL: reason"
 * (exit 1).
 */
public final class Transactions {
    private static final Duration DEADLINE = Duration.ofSeconds(60);

    public static void main(String[] args) {
        if (args.length != 5) {
            System.out.println("RESULT FAIL: usage: Transactions BOOTSTRAP IN OUT GROUP N");
            System.exit(2);
        }
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3];
        int n = Integer.parseInt(args[4]);
        try {
            String failure = run(bootstrap, in, out, group, n);
            System.out.println(failure == null ? "RESULT OK" : "RESULT FAIL: " + failure);
            System.exit(failure == null ? 0 : 1);
        } catch (Exception e) {
            e.printStackTrace();
            System.out.println("RESULT FAIL: " + e);
            System.exit(1);
        }
    }

    private static String run(String bootstrap, String in, String out, String group, int n) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(in, 2, (short) 1), new NewTopic(out, 2, (short) 1))).all().get();
            try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(bootstrap, null))) {
                for (int i = 0; i < n; i++) {
                    p.send(new ProducerRecord<>(in, i % 2, null, String.format("v%03d", i))).get();
                }
            }

            Properties cp = consumerProps(bootstrap, "read_committed");
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp);
                 KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(bootstrap, "java-ctp"))) {
                p.initTransactions();
                c.subscribe(List.of(in));
                String err = round(c, p, out, n, "aborted", false);
                if (err != null) {
                    return err;
                }
                // The aborted round moved the consumer on; go back to the
                // group's committed offsets (none: the beginning).
                for (TopicPartition tp : c.assignment()) {
                    OffsetAndMetadata om = c.committed(Set.of(tp)).get(tp);
                    if (om != null) {
                        return "aborted round committed offset " + om.offset() + " for " + tp;
                    }
                    c.seekToBeginning(Set.of(tp));
                }
                err = round(c, p, out, n, "committed", true);
                if (err != null) {
                    return err;
                }
            }
            System.out.println("CTP OK");

            List<String> committed = readAll(bootstrap, out, "read_committed", n);
            long good = committed.stream().filter(v -> v.startsWith("committed:")).count();
            System.out.println("READ_COMMITTED " + committed.size());
            if (committed.size() != n || good != n) {
                return "read_committed saw " + committed.size() + " records, " + good + " committed; want exactly " + n;
            }
            List<String> all = readAll(bootstrap, out, "read_uncommitted", 2 * n);
            System.out.println("READ_UNCOMMITTED " + all.size());
            if (all.size() != 2 * n) {
                return "read_uncommitted saw " + all.size() + " records, want " + (2 * n);
            }
            long total = 0;
            for (OffsetAndMetadata om : admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().values()) {
                total += om.offset();
            }
            System.out.println("OFFSETS " + total);
            if (total != n) {
                return "the group's committed offsets add up to " + total + ", want " + n;
            }
        }
        return fencing(bootstrap, out);
    }

    private static String round(KafkaConsumer<String, String> c, KafkaProducer<String, String> p, String out, int n,
                                String tag, boolean commit) {
        p.beginTransaction();
        int got = 0;
        long deadline = System.nanoTime() + DEADLINE.toNanos();
        while (got < n) {
            if (System.nanoTime() > deadline) {
                return tag + " round: consumed " + got + " of " + n;
            }
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                p.send(new ProducerRecord<>(out, r.partition(), null, tag + ":" + r.value()));
                got++;
            }
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : c.assignment()) {
            offsets.put(tp, new OffsetAndMetadata(c.position(tp)));
        }
        p.flush();
        p.sendOffsetsToTransaction(offsets, c.groupMetadata());
        if (commit) {
            p.commitTransaction();
        } else {
            p.abortTransaction();
        }
        return null;
    }

    /** A second producer with the same transactional.id fences the first. */
    private static String fencing(String bootstrap, String out) {
        try (KafkaProducer<String, String> first = new KafkaProducer<>(producerProps(bootstrap, "java-fence"));
             KafkaProducer<String, String> second = new KafkaProducer<>(producerProps(bootstrap, "java-fence"))) {
            first.initTransactions();
            second.initTransactions();
            try {
                first.beginTransaction();
                first.send(new ProducerRecord<>(out, 0, null, "fenced")).get();
                first.commitTransaction();
                return "the first producer committed after a second one with its transactional.id started";
            } catch (ProducerFencedException | InvalidProducerEpochException e) {
                System.out.println("FENCED");
            } catch (Exception e) {
                if (!(e.getCause() instanceof ProducerFencedException) && !(e.getCause() instanceof InvalidProducerEpochException)) {
                    return "the fenced producer failed with " + e + ", want ProducerFencedException";
                }
                System.out.println("FENCED");
            }
            second.beginTransaction();
            second.send(new ProducerRecord<>(out, 0, null, "second")).get();
            second.commitTransaction();
        } catch (KafkaException | InterruptedException | java.util.concurrent.ExecutionException e) {
            return "fencing: " + e;
        }
        return null;
    }

    private static List<String> readAll(String bootstrap, String topic, String isolation, int want) {
        List<String> vals = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(bootstrap, isolation))) {
            List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = c.endOffsets(tps);
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    vals.add(r.value());
                }
                boolean done = true;
                for (TopicPartition tp : tps) {
                    done &= c.position(tp) >= ends.get(tp);
                }
                if (done && vals.size() >= want) {
                    break;
                }
            }
        }
        Collections.sort(vals);
        return vals;
    }

    private static Properties producerProps(String bootstrap, String txnID) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        if (txnID != null) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnID);
            p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        }
        return p;
    }

    private static Properties consumerProps(String bootstrap, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        return p;
    }
}
