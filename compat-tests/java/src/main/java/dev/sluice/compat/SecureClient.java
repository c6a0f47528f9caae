package dev.sluice.compat;

import java.io.FileInputStream;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client over a secured listener, for the security tests. PROPS is
 * a client properties file (bootstrap.servers, security.protocol, sasl.*,
 * ssl.*), read as the Kafka tools read --command-config.
 *
 * Usage: SecureClient PROPS TOPIC MODE [PROPS TOPIC MODE ...]
 *
 * Each triple runs in turn, in one JVM (a JVM start is most of the cost).
 * MODE roundtrip: creates TOPIC (Admin), produces COUNT records (acks=all),
 * reads them back with an assigned consumer, and prints "PRODUCED n",
 * "CONSUMED n". MODE authfail: expects the broker to refuse the
 * credentials (SaslAuthenticationException from Admin.describeCluster).
 * Each triple prints "TOPIC OK" or "TOPIC FAIL: reason"; the last line is
 * "RESULT OK" (exit 0) or "RESULT FAIL" (exit 1).
 */
public final class SecureClient {
    private static final int COUNT = 50;

    public static void main(String[] args) throws Exception {
        if (args.length == 0 || args.length % 3 != 0) {
            System.out.println("RESULT FAIL: usage: SecureClient PROPS TOPIC MODE [PROPS TOPIC MODE ...]");
            System.exit(2);
        }
        boolean ok = true;
        for (int i = 0; i < args.length; i += 3) {
            Properties base = new Properties();
            try (InputStream in = new FileInputStream(args[i])) {
                base.load(in);
            }
            String topic = args[i + 1];
            String failure;
            try {
                failure = args[i + 2].equals("authfail") ? authFail(base) : roundTrip(base, topic);
            } catch (Exception e) {
                failure = e.toString();
            }
            System.out.println(topic + (failure == null ? " OK" : " FAIL: " + failure));
            ok = ok && failure == null;
        }
        System.out.println(ok ? "RESULT OK" : "RESULT FAIL");
        System.exit(ok ? 0 : 1);
    }

    private static String authFail(Properties base) throws InterruptedException {
        try (Admin admin = Admin.create(base)) {
            admin.describeCluster().clusterId().get();
            return "the broker accepted credentials it should refuse";
        } catch (ExecutionException e) {
            if (e.getCause() instanceof SaslAuthenticationException) {
                System.out.println("REFUSED " + e.getCause().getMessage());
                return null;
            }
            return "wanted SaslAuthenticationException, got " + e.getCause();
        }
    }

    private static String roundTrip(Properties base, String topic) throws Exception {
        try (Admin admin = Admin.create(base)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        Properties pp = (Properties) base.clone();
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            for (int i = 0; i < COUNT; i++) {
                p.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get();
            }
        }
        System.out.println("PRODUCED " + COUNT);
        Properties cp = (Properties) base.clone();
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 60_000;
            while (values.size() < COUNT && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    values.add(r.value());
                }
            }
        }
        System.out.println("CONSUMED " + values.size());
        for (int i = 0; i < COUNT; i++) {
            if (i >= values.size() || !values.get(i).equals("v" + i)) {
                return "record " + i + " is " + (i < values.size() ? values.get(i) : "missing");
            }
        }
        return null;
    }
}
