package dev.sluice.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client's side of the routing test (compat-tests/routing_java_test.go).
 *
 * Usage:
 *   Routing produce BOOTSTRAPS TOPIC FILE
 *   Routing consume BOOTSTRAPS TOPIC GROUP COUNT PARTITIONS RACK WARM
 *
 * produce sends every "key value" line of FILE with the producer's default
 * settings (idempotence on, acks=all). consume reads exactly COUNT records
 * as the only member of GROUP (classic protocol; client.rack=RACK unless
 * RACK is "-"), committing synchronously what each poll returned after
 * processing it; with WARM=1 it prints "WARM" once it has committed records
 * of all PARTITIONS, and "DONE" once it has committed all COUNT, before it
 * closes, and after each waits for a line on stdin.
 * Output: "V value" per record, then "RESULT OK" or "RESULT FAIL: reason"
 * (exit 1).
 */
public final class Routing {
    private static final Duration DEADLINE = Duration.ofSeconds(120);

    public static void main(String[] args) {
        String failure = null;
        try {
            if (args.length == 4 && args[0].equals("produce")) {
                produce(args[1], args[2], Path.of(args[3]));
            } else if (args.length == 8 && args[0].equals("consume")) {
                failure = consume(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                        args[6], args[7].equals("1"));
            } else {
                failure = "usage: Routing produce BOOTSTRAPS TOPIC FILE | consume BOOTSTRAPS TOPIC GROUP COUNT PARTITIONS RACK WARM";
            }
        } catch (Exception e) {
            e.printStackTrace();
            failure = e.toString();
        }
        System.out.flush();
        if (failure == null) {
            System.out.println("RESULT OK");
            System.exit(0);
        }
        System.out.println("RESULT FAIL: " + failure.replace('\n', ' '));
        System.exit(1);
    }

    private static void produce(String bootstraps, String topic, Path file) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstraps);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "sluice-routing-java");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
                if (line.isEmpty()) {
                    continue;
                }
                int sp = line.indexOf(' ');
                acks.add(producer.send(new ProducerRecord<>(topic, line.substring(0, sp), line.substring(sp + 1))));
            }
            producer.flush();
            for (Future<RecordMetadata> f : acks) {
                f.get();
            }
        }
        System.out.println("PRODUCED " + acks.size());
    }

    private static boolean handshake(BufferedReader stdin, String what) throws Exception {
        System.out.println(what);
        System.out.flush();
        return stdin.readLine() != null;
    }

    private static String consume(String bootstraps, String topic, String group, int count, int partitions,
            String rack, boolean warm) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstraps);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "sluice-routing-java");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "300");
        if (!rack.equals("-")) {
            p.put(ConsumerConfig.CLIENT_RACK_CONFIG, rack);
        }
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Set<Integer> seen = new HashSet<>();
        boolean warmed = false;
        int consumed = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (consumed < count) {
                if (System.nanoTime() > deadline) {
                    return "consumed " + consumed + " of " + count + " before the deadline";
                }
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                for (ConsumerRecord<String, String> r : rs) {
                    if (consumed == count) {
                        return "more records than the " + count + " produced";
                    }
                    System.out.println("V " + r.value());
                    consumed++;
                    seen.add(r.partition());
                    commit.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                if (!commit.isEmpty()) {
                    c.commitSync(commit);
                }
                if (warm && !warmed && seen.size() == partitions) {
                    warmed = true;
                    if (!handshake(stdin, "WARM")) {
                        return "stdin closed at warm-up";
                    }
                }
            }
            // Before close(), which ends the fetch session with every
            // broker the consumer fetched from, redirected or not.
            if (warm && !handshake(stdin, "DONE")) {
                return "stdin closed at the end";
            }
        }
        return null;
    }
}
