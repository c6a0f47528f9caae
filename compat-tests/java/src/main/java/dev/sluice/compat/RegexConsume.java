package dev.sluice.compat;

import java.time.Duration;
import java.time.Instant;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A KIP-848 member (group.protocol=consumer) subscribed with a
 * SubscriptionPattern: the broker resolves the RE2J regex
 * (SubscribedTopicRegex) and assigns the matching topics, including topics
 * created after the subscription.
 *
 * Usage: RegexConsume BOOTSTRAP GROUP REGEX COUNT SECONDS
 *
 * Prints "ASSIGNED topic-p,..." on each change of assignment, "RECORD topic
 * value" per record, and a last line "RESULT OK" once COUNT records were
 * consumed (exit 0) or "RESULT FAIL: reason" (exit 1) after SECONDS.
 */
public final class RegexConsume {
    public static void main(String[] args) {
        if (args.length != 5) {
            System.out.println("RESULT FAIL: usage: RegexConsume BOOTSTRAP GROUP REGEX COUNT SECONDS");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-regex");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        int count = Integer.parseInt(args[3]);
        Instant deadline = Instant.now().plusSeconds(Long.parseLong(args[4]));
        int consumed = 0;
        String assigned = "";
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(new SubscriptionPattern(args[2]));
            while (consumed < count && Instant.now().isBefore(deadline)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    System.out.println("RECORD " + r.topic() + " " + r.value());
                    consumed++;
                }
                String now = c.assignment().stream().map(Object::toString).sorted().reduce((a, b) -> a + "," + b).orElse("");
                if (!now.equals(assigned)) {
                    assigned = now;
                    System.out.println("ASSIGNED " + now);
                }
                System.out.flush();
            }
        } catch (Exception e) {
            System.out.println("RESULT FAIL: " + e);
            System.exit(1);
        }
        if (consumed < count) {
            System.out.println("RESULT FAIL: consumed " + consumed + " of " + count);
            System.exit(1);
        }
        System.out.println("RESULT OK");
    }
}
