"""Share group (KIP-932) scenario for confluent-kafka's ShareConsumer.

Usage: share.py BOOTSTRAP TOPIC GROUP CONSUMERS COUNT SECONDS

CONSUMERS share consumers in GROUP (explicit acknowledgement, at most 10
records a poll) poll TOPIC (which must exist, one partition) and accept
every record, committing the acknowledgements after each poll; consumer 0
releases the first record it gets once. Once every consumer has polled
for a while, COUNT records "rec-N" are produced in steps of 10. Prints
"GOT consumer value deliveryCount" per record received, "RELEASED value"
for the released one, "ACKFAIL consumer error" for a failed commit. Which
consumer a record goes to is a race among their fetches, so once COUNT are
produced, further steps of 10 follow (up to 4 x COUNT in all) while some
consumer has had none; then "PRODUCED total", and "DONE" when every produced
value was accepted or SECONDS passed.
"""

import sys
import threading
import time

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

bootstrap, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
n, count, seconds = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
deadline = time.time() + seconds
lock = threading.Lock()
accepted = set()
polled = [0] * n
got = [False] * n
stop = threading.Event()


def out(line):
    with lock:
        print(line, flush=True)


def consume(i):
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit", "max.poll.records": 10})
    c.subscribe([topic])
    released = False
    try:
        while not stop.is_set() and time.time() < deadline:
            msgs = c.poll(0.5) or []
            polled[i] += 1
            for m in msgs:
                if m.error():
                    out("ERR %d %s" % (i, m.error()))
                    continue
                v = m.value().decode()
                if i == 0 and not released and m.delivery_count() == 1:
                    released = True
                    out("RELEASED %s" % v)
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                    continue
                out("GOT %d %s %d" % (i, v, m.delivery_count()))
                got[i] = True
                c.acknowledge(m, AcknowledgeType.ACCEPT)
                with lock:
                    accepted.add(v)
            if msgs:
                for tp, err in (c.commit_sync(30) or {}).items():
                    if err is not None:
                        out("ACKFAIL %d %s" % (i, err))
                time.sleep(0.05)  # leave the partition to the others a moment
    finally:
        c.close()


threads = [threading.Thread(target=consume, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
# Share groups start at the end of the log: let every member join and fetch.
while min(polled) < 6 and time.time() < deadline:
    time.sleep(0.2)
p = Producer({"bootstrap.servers": bootstrap})
produced = 0
while time.time() < deadline and (produced < count or (not all(got) and produced < 4 * count)):
    for j in range(produced, produced + 10):
        p.produce(topic, value=("rec-%d" % j).encode())
    p.flush(30)
    produced += 10
    time.sleep(0.1 if produced <= count else 0.3)
out("PRODUCED %d" % produced)
while time.time() < deadline:
    with lock:
        if len(accepted) >= produced:
            break
    time.sleep(0.2)
stop.set()
for t in threads:
    t.join()
out("DONE")
