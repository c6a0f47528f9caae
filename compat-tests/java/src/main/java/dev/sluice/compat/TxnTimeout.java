package dev.sluice.compat;

import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transaction left open past transaction.timeout.ms, with the Java
 * client: a transactional producer (transaction.timeout.ms=2000) sends
 * five records to TOPIC and waits WAIT_MS while the broker aborts its
 * transaction. Its next send must fail; then it aborts (the Java client
 * on transaction version 2 takes the coordinator's abort as done and goes
 * on with the bumped epoch, as against Kafka 4.4) and commits one record
 * "next" in a new transaction.
 *
 * Usage: TxnTimeout BOOTSTRAP TOPIC TRANSACTIONAL_ID WAIT_MS
 *
 * Prints "LATE_SEND_FAILED exception-class", "ABORTED", "COMMITTED" and a
 * last line "RESULT OK" (exit 0) or "RESULT FAIL: reason" (exit 1).
 */
public final class TxnTimeout {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.out.println("RESULT FAIL: usage: TxnTimeout BOOTSTRAP TOPIC TRANSACTIONAL_ID WAIT_MS");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1], id = args[2];
        long waitMs = Long.parseLong(args[3]);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 2000);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10000);
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            prod.initTransactions();
            prod.beginTransaction();
            for (int i = 0; i < 5; i++) {
                prod.send(new ProducerRecord<>(topic, "java-timed-out-" + i)).get();
            }
            Thread.sleep(waitMs);
            try {
                prod.send(new ProducerRecord<>(topic, "java-late")).get();
                System.out.println("RESULT FAIL: a send at the timed-out epoch succeeded");
                System.exit(1);
            } catch (ExecutionException e) {
                System.out.println("LATE_SEND_FAILED " + e.getCause().getClass().getSimpleName());
            }
            prod.abortTransaction();
            System.out.println("ABORTED");
            prod.beginTransaction();
            prod.send(new ProducerRecord<>(topic, "next")).get();
            prod.commitTransaction();
            System.out.println("COMMITTED");
        } catch (Exception e) {
            e.printStackTrace();
            System.out.println("RESULT FAIL: " + e);
            System.exit(1);
        }
        System.out.println("RESULT OK");
        System.exit(0);
    }
}
