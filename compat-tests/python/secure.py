"""confluent-kafka (librdkafka) over SASL_SSL, for the security tests.

Usage: secure.py BOOTSTRAP CA MECHANISM USER PASSWORD TOPIC MODE

MODE roundtrip produces 20 records to TOPIC and reads them back; MODE
authfail expects the broker to refuse the credentials. The last line is
"RESULT OK" (exit 0) or "RESULT FAIL: reason" (exit 1).
"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

COUNT = 20


def conf(bootstrap, ca, mech, user, password):
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": ca,
        "sasl.mechanism": mech,
        "sasl.username": user,
        "sasl.password": password,
    }


def roundtrip(c, topic):
    p = Producer(dict(c, **{"acks": "all"}))
    errors = []
    for i in range(COUNT):
        p.produce(topic, value=b"v%d" % i, on_delivery=lambda err, msg: err and errors.append(err))
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
    if got != [b"v%d" % i for i in range(COUNT)]:
        return "read back %d records: %s" % (len(got), got[:3])
    print("CONSUMED %d" % len(got))
    return None


def authfail(c):
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


def main():
    if len(sys.argv) != 8:
        print("RESULT FAIL: usage: secure.py BOOTSTRAP CA MECHANISM USER PASSWORD TOPIC MODE")
        sys.exit(2)
    bootstrap, ca, mech, user, password, topic, mode = sys.argv[1:]
    c = conf(bootstrap, ca, mech, user, password)
    fail = authfail(c) if mode == "authfail" else roundtrip(c, topic)
    if fail:
        print("RESULT FAIL: %s" % fail)
        sys.exit(1)
    print("RESULT OK")


if __name__ == "__main__":
    main()
