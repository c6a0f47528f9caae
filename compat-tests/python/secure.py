"""confluent-kafka (librdkafka) and kafka-python over a secured listener,
for the security tests.

Usage: secure.py LIB BOOTSTRAP TOPIC MODE [KEY=VALUE ...]

LIB is confluent or kafka-python; the KEY=VALUE pairs are the client's own
configuration (librdkafka's names: security.protocol, ssl.ca.location,
sasl.mechanism, ...; kafka-python's keyword arguments: security_protocol,
ssl_cafile, sasl_mechanism, ...). MODE roundtrip produces 20 records to
TOPIC and reads them back; MODE authfail (confluent) expects the broker to
refuse the credentials. The last line is "RESULT OK" (exit 0) or
"RESULT FAIL: reason" (exit 1).
"""
import sys
import time

COUNT = 20


def values():
    return [b"v%d" % i for i in range(COUNT)]


def confluent_roundtrip(c, topic):
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    p = Producer(dict(c, **{"acks": "all"}))
    errors = []
    for v in values():
        p.produce(topic, value=v, on_delivery=lambda err, msg: err and errors.append(err))
    left = p.flush(30)
    if left or errors:
        return "produce: %d unflushed, errors %s" % (left, errors[:3])
    cons = Consumer(dict(c, **{"group.id": "secure-py", "enable.auto.commit": False}))
    cons.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 30
    while len(got) < COUNT and time.time() < deadline:
        m = cons.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                continue
            return "consume: %s" % m.error()
        got.append(m.value())
    cons.close()
    if got != values():
        return "read back %d records: %s" % (len(got), got[:3])
    print("CONSUMED %d" % len(got))
    return None


def confluent_authfail(c):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    errs = []
    a = AdminClient(dict(c, **{"error_cb": lambda e: errs.append(e)}))
    try:
        a.list_topics(timeout=3)
        return "the broker accepted credentials it should refuse"
    except KafkaException as e:
        errs.append(e.args[0])
    # The authentication error itself reaches error_cb when the client is
    # served.
    for _ in range(20):
        if any(e.code() == KafkaError._AUTHENTICATION for e in errs):
            break
        a.poll(0.5)
    if any(e.code() == KafkaError._AUTHENTICATION for e in errs):
        print("REFUSED %s" % [e for e in errs if e.code() == KafkaError._AUTHENTICATION][0])
        return None
    return "wanted an authentication error, got %s" % errs[:3]


def kafka_python_roundtrip(c, topic):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(acks="all", **c)
    futures = [p.send(topic, value=v) for v in values()]
    for f in futures:
        f.get(timeout=30)
    p.close()
    cons = KafkaConsumer(enable_auto_commit=False, consumer_timeout_ms=1000, **c)
    tp = TopicPartition(topic, 0)
    cons.assign([tp])
    cons.seek_to_beginning(tp)
    got = []
    deadline = time.time() + 30
    while len(got) < COUNT and time.time() < deadline:
        for recs in cons.poll(timeout_ms=500).values():
            got.extend(r.value for r in recs)
    cons.close()
    if got != values():
        return "read back %d records: %s" % (len(got), got[:3])
    print("CONSUMED %d" % len(got))
    return None


def main():
    if len(sys.argv) < 5 or sys.argv[1] not in ("confluent", "kafka-python"):
        print("RESULT FAIL: usage: secure.py confluent|kafka-python BOOTSTRAP TOPIC MODE [KEY=VALUE ...]")
        sys.exit(2)
    lib, bootstrap, topic, mode = sys.argv[1:5]
    c = dict(kv.split("=", 1) for kv in sys.argv[5:])
    try:
        if lib == "confluent":
            c["bootstrap.servers"] = bootstrap
            fail = confluent_authfail(c) if mode == "authfail" else confluent_roundtrip(c, topic)
        else:
            c["bootstrap_servers"] = bootstrap
            fail = "authfail is not implemented for kafka-python" if mode == "authfail" else kafka_python_roundtrip(c, topic)
    except Exception as e:  # the reason goes to the RESULT line
        fail = "%s: %s" % (type(e).__name__, e)
    if fail:
        print("RESULT FAIL: %s" % fail)
        sys.exit(1)
    print("RESULT OK")


if __name__ == "__main__":
    main()
