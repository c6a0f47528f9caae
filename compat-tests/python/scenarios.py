#!/usr/bin/env python3
"""Sluice compat scenarios for the Python clients (driven by python_test.go).

    python3 scenarios.py CLIENT GROUP BOOTSTRAP PREFIX [ARGS...]

CLIENT is confluent (confluent-kafka, librdkafka) or kafka-python. GROUP is
one scenario group, run in this one process:

    basic        bootstrap/metadata, acks 0/1/all, idempotence, keys/nulls/
                 headers/timestamps, records near and over max.message.bytes,
                 consume from earliest/latest/a timestamp, unknown topic,
                 a transactional producer's commits and abort read back
                 read_committed, offsets sent with a transaction, fencing
    admin        create, describe configs, alter configs, create partitions,
                 delete; a bad config value
    group        a consumer group: commit and resume, rebalance of two members
    write-codecs one topic per codec (PREFIX-<codec>) with the shared content
    read-codecs  ARGS are topics; prints the digest of each one's content

Every scenario prints one line: RESULT <scenario> pass|fail|na <detail>.
The Go test owns the topics (it creates them before and checks them after).
"""
import hashlib
import sys
import time
import traceback

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_RECORDS = 50
TS_BASE = 1_700_000_000_000


def result(scenario, status, detail=""):
    print("RESULT %s %s %s" % (scenario, status, detail.replace("\n", " ")[:400]), flush=True)


def codec_record(writer, codec, i):
    key = ("k-%d" % i).encode()
    value = ("%s/%s/%d/" % (writer, codec, i) + "abcdefghij" * 20).encode()
    return key, value, [("h", codec.encode())]


def digest(records):
    """sha256 over key<TAB>value<TAB>hk=hv,...<LF> per record, as in the Go test."""
    h = hashlib.sha256()
    for key, value, headers in records:
        hs = ",".join("%s=%s" % (k, (v or b"").decode()) for k, v in headers)
        h.update(b"%s\t%s\t%s\n" % (key or b"", value or b"", hs.encode()))
    return h.hexdigest()


class Rec:
    def __init__(self, offset, key, value, headers, ts):
        self.offset, self.key, self.value, self.headers, self.ts = offset, key, value, headers or [], ts

    def __repr__(self):
        return "Rec(o=%d k=%r v=%r h=%r ts=%r)" % (self.offset, self.key, (self.value or b"")[:20], self.headers, self.ts)


# ---------------------------------------------------------------- confluent-kafka

class Confluent:
    name = "python-confluent-kafka"

    def __init__(self, bootstrap):
        import confluent_kafka as ck
        from confluent_kafka import admin as cka
        self.ck, self.cka, self.bootstrap = ck, cka, bootstrap
        self.version = "confluent-kafka %s (librdkafka %s)" % (ck.__version__, ck.libversion()[0])

    def conf(self, **kw):
        c = {"bootstrap.servers": self.bootstrap, "client.id": "sluice-compat-confluent-py"}
        c.update(kw)
        return c

    def metadata(self):
        a = self.cka.AdminClient(self.conf())
        md = a.list_topics(timeout=10)
        return {t: len(tm.partitions) for t, tm in md.topics.items()}, len(md.brokers)

    def topic_error(self, topic):
        a = self.cka.AdminClient(self.conf())
        md = a.list_topics(topic=topic, timeout=10)
        tm = md.topics.get(topic)
        return None if tm is None or tm.error is None else tm.error.code()

    def produce(self, topic, recs, acks="all", idempotent=False, compression="none", linger=5):
        p = self.ck.Producer(self.conf(**{"acks": acks, "enable.idempotence": idempotent,
                                          "compression.type": compression, "linger.ms": linger,
                                          "message.timeout.ms": 20000}))
        errs = [None] * len(recs)
        done = [0]

        def cb(i):
            def f(err, msg):
                done[0] += 1
                if err is not None:
                    errs[i] = err.code()
            return f

        for i, (k, v, hs, ts, part) in enumerate(recs):
            kw = {"key": k, "value": v, "headers": hs or None, "on_delivery": cb(i)}
            if ts is not None:
                kw["timestamp"] = ts
            if part is not None:
                kw["partition"] = part
            p.produce(topic, **kw)
            p.poll(0)
        left = p.flush(30)
        if left:
            raise RuntimeError("%d records not delivered after 30 s" % left)
        return errs

    def _consumer(self, **kw):
        return self.ck.Consumer(self.conf(**{"group.id": kw.pop("group", "sluice-compat-unused"),
                                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                             "fetch.wait.max.ms": 200, **kw}))

    def consume(self, topic, partition, start, n, timeout=20, on_assigned=None, **ckw):
        TP = self.ck.TopicPartition
        c = self._consumer(**ckw)
        try:
            if start == "earliest":
                off = self.ck.OFFSET_BEGINNING
            elif start == "latest":
                off = self.ck.OFFSET_END
            elif start[0] == "ts":
                got = c.offsets_for_times([TP(topic, partition, start[1])], timeout=10)[0]
                if got.error:
                    raise RuntimeError("offsets_for_times: %s" % got.error)
                off = got.offset
            else:
                off = start[1]
            c.assign([TP(topic, partition, off)])
            if on_assigned:
                # librdkafka reports no position before the first record, so
                # give it time to resolve "latest" (ListOffsets) and start
                # fetching before anything new is written.
                end = time.time() + 2
                while time.time() < end:
                    c.poll(0.1)
                on_assigned()
            out = []
            deadline = time.time() + timeout
            while len(out) < n and time.time() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() == self.ck.KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError("consume: %s" % m.error())
                out.append(Rec(m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1]))
            return out
        finally:
            c.close()

    def offset_for_time(self, topic, partition, ts):
        c = self._consumer()
        try:
            got = c.offsets_for_times([self.ck.TopicPartition(topic, partition, ts)], timeout=10)[0]
            return got.offset
        finally:
            c.close()

    read_committed = {"isolation.level": "read_committed"}
    # librdkafka turns PRODUCER_FENCED from EndTxn into a fatal error.
    fenced_error = "_FENCED fatal=True"

    def transactions(self, topic, txns):
        """Runs each (values, commit) of txns as one transaction of one
        transactional producer; an aborted one is flushed first, so that
        its records reach the log before the ABORT marker."""
        p = self.ck.Producer(self.conf(**{"transactional.id": topic + "-tid", "message.timeout.ms": 20000}))
        p.init_transactions(30)
        for vals, commit in txns:
            p.begin_transaction()
            for v in vals:
                p.produce(topic, value=v, partition=0)
            left = p.flush(30)
            if left:
                raise RuntimeError("%d records not delivered after 30 s" % left)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)

    def txn_offsets(self, tin, tout, group, txn_id):
        """txn-offsets (see group_basic) with send_offsets_to_transaction
        and the consumer's consumer_group_metadata() (assigned, not
        subscribed: generation -1); returns the values read from tin and
        the group's committed offset of tin partition 0 afterwards."""
        TP = self.ck.TopicPartition
        c = self._consumer(group=group, **{"isolation.level": "read_committed"})
        p = self.ck.Producer(self.conf(**{"transactional.id": txn_id, "message.timeout.ms": 20000}))
        try:
            c.assign([TP(tin, 0, self.ck.OFFSET_BEGINNING)])
            msgs = []
            deadline = time.time() + 20
            while len(msgs) < 10 and time.time() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    msgs.append(m)
            p.init_transactions(30)
            for i, commit in enumerate([True, False]):
                batch = msgs[5 * i:5 * i + 5]
                p.begin_transaction()
                for m in batch:
                    p.produce(tout, value=m.value().replace(b"i-", b"o-"), partition=0)
                left = p.flush(30)
                if left:
                    raise RuntimeError("%d records not delivered after 30 s" % left)
                p.send_offsets_to_transaction([TP(tin, 0, batch[-1].offset() + 1)], c.consumer_group_metadata(), 30)
                if commit:
                    p.commit_transaction(30)
                else:
                    p.abort_transaction(30)
            committed = c.committed([TP(tin, 0)], timeout=20)[0]
            return [m.value() for m in msgs], committed.offset
        finally:
            c.close()

    def txn_fencing(self, topic, txn_id):
        """txn-fencing (see group_basic); returns the error of A's commit
        after B initialized, as a string, or None."""
        conf = self.conf(**{"transactional.id": txn_id, "message.timeout.ms": 20000})
        a, b = self.ck.Producer(conf), self.ck.Producer(conf)
        a.init_transactions(30)
        a.begin_transaction()
        a.produce(topic, value=b"f-a-0", partition=0)
        if a.flush(30):
            raise RuntimeError("f-a-0 not delivered after 30 s")
        b.init_transactions(30)
        err = None
        try:
            a.commit_transaction(30)
        except self.ck.KafkaException as e:
            ke = e.args[0]
            err = "%s fatal=%s" % (ke.name(), ke.fatal())
        b.begin_transaction()
        b.produce(topic, value=b"f-b-0", partition=0)
        if b.flush(30):
            raise RuntimeError("f-b-0 not delivered after 30 s")
        b.commit_transaction(30)
        return err

    # admin
    def _wait(self, futs):
        for _, f in futs.items():
            try:
                f.result(timeout=15)
            except self.ck.KafkaException as e:
                return e.args[0].code()
        return None

    def create_topic(self, name, partitions, configs=None):
        a = self.cka.AdminClient(self.conf())
        return self._wait(a.create_topics([self.cka.NewTopic(name, partitions, 1, config=configs or {})]))

    def describe_config(self, name):
        a = self.cka.AdminClient(self.conf())
        r = self.cka.ConfigResource(self.cka.ResourceType.TOPIC, name)
        res = a.describe_configs([r])[r].result(timeout=15)
        return {k: v.value for k, v in res.items()}

    def alter_config(self, name, key, value):
        a = self.cka.AdminClient(self.conf())
        r = self.cka.ConfigResource(self.cka.ResourceType.TOPIC, name, incremental_configs=[
            self.cka.ConfigEntry(key, value, incremental_operation=self.cka.AlterConfigOpType.SET)])
        return self._wait(a.incremental_alter_configs([r]))

    def create_partitions(self, name, total):
        a = self.cka.AdminClient(self.conf())
        return self._wait(a.create_partitions([self.cka.NewPartitions(name, total)]))

    def delete_topic(self, name):
        a = self.cka.AdminClient(self.conf())
        return self._wait(a.delete_topics([name]))

    # groups
    def group_consumer(self, group, topic):
        return ConfluentMember(self, group, topic)


class ConfluentMember:
    def __init__(self, cl, group, topic):
        self.c = cl._consumer(group=group, **{"session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                                               "partition.assignment.strategy": "range"})
        self.c.subscribe([topic])

    def poll(self, t):
        m = self.c.poll(t)
        if m is None or m.error():
            return []
        return [Rec(m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1])]

    def assignment(self):
        return sorted(tp.partition for tp in self.c.assignment())

    def commit(self):
        self.c.commit(asynchronous=False)

    def close(self):
        self.c.close()


# ---------------------------------------------------------------- kafka-python

class KafkaPython:
    name = "kafka-python"

    def __init__(self, bootstrap):
        import kafka
        self.k, self.bootstrap = kafka, bootstrap
        self.version = "kafka-python %s" % kafka.__version__

    def metadata(self):
        c = self.k.KafkaConsumer(bootstrap_servers=self.bootstrap, client_id="sluice-compat-kafka-python")
        try:
            topics = c.topics()
            out = {t: len(c.partitions_for_topic(t) or ()) for t in topics}
            brokers = len(c._client.cluster.brokers())
            return out, brokers
        finally:
            c.close()

    def topic_error(self, topic):
        a = self.admin()
        try:
            d = a.describe_topics([topic])
            return d[0]["error_code"] if d else None
        except self.k.errors.KafkaError as e:
            return getattr(e, "errno", str(e))
        finally:
            a.close()

    def produce(self, topic, recs, acks="all", idempotent=False, compression="none", linger=5):
        acks_v = {"0": 0, "1": 1, "all": "all"}[str(acks)]
        kw = dict(bootstrap_servers=self.bootstrap, client_id="sluice-compat-kafka-python", acks=acks_v,
                  compression_type=None if compression == "none" else compression, linger_ms=linger,
                  enable_idempotence=idempotent, retries=3 if not idempotent else 2**31 - 1)
        if not idempotent:
            kw["max_in_flight_requests_per_connection"] = 1
        p = self.k.KafkaProducer(**kw)
        futs = []
        for k, v, hs, ts, part in recs:
            futs.append(p.send(topic, key=k, value=v, headers=hs or None, timestamp_ms=ts, partition=part))
        p.flush(30)
        errs = []
        for f in futs:
            try:
                f.get(timeout=30)
                errs.append(None)
            except self.k.errors.KafkaError as e:
                errs.append(getattr(e, "errno", str(e)))
        p.close(10)
        return errs

    def _consumer(self, **kw):
        return self.k.KafkaConsumer(bootstrap_servers=self.bootstrap, client_id="sluice-compat-kafka-python",
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    fetch_max_wait_ms=200, **kw)

    def consume(self, topic, partition, start, n, timeout=20, on_assigned=None, **ckw):
        TP = self.k.TopicPartition
        tp = TP(topic, partition)
        c = self._consumer(**ckw)
        try:
            c.assign([tp])
            if start == "earliest":
                c.seek_to_beginning(tp)
            elif start == "latest":
                c.seek_to_end(tp)
            elif start[0] == "ts":
                got = c.offsets_for_times({tp: start[1]})[tp]
                c.seek(tp, got.offset)
            else:
                c.seek(tp, start[1])
            if on_assigned:
                c.position(tp)  # resolves "latest" now
                on_assigned()
            out = []
            deadline = time.time() + timeout
            while len(out) < n and time.time() < deadline:
                for _, ms in c.poll(500).items():
                    for m in ms:
                        out.append(Rec(m.offset, m.key, m.value, m.headers, m.timestamp))
            return out
        finally:
            c.close()

    def offset_for_time(self, topic, partition, ts):
        c = self._consumer()
        try:
            tp = self.k.TopicPartition(topic, partition)
            got = c.offsets_for_times({tp: ts})[tp]
            return None if got is None else got.offset
        finally:
            c.close()

    def admin(self):
        return self.k.KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="sluice-compat-kafka-python")

    read_committed = {"isolation_level": "read_committed"}
    fenced_error = "ProducerFencedError"

    def transactions(self, topic, txns):
        """As Confluent.transactions, with kafka-python's transactional
        producer (KafkaProducer(transactional_id=...), 2.1+)."""
        p = self.k.KafkaProducer(bootstrap_servers=self.bootstrap, client_id="sluice-compat-kafka-python",
                                 transactional_id=topic + "-tid", enable_idempotence=True, acks="all")
        try:
            p.init_transactions()
            for vals, commit in txns:
                p.begin_transaction()
                futs = [p.send(topic, value=v, partition=0) for v in vals]
                p.flush(30)
                for f in futs:
                    f.get(timeout=30)
                if commit:
                    p.commit_transaction()
                else:
                    p.abort_transaction()
        finally:
            p.close(10)

    def txn_offsets(self, tin, tout, group, txn_id):
        """As Confluent.txn_offsets, with send_offsets_to_transaction and
        KafkaConsumer.group_metadata() (3.0+)."""
        TP, OAM = self.k.TopicPartition, self.k.structs.OffsetAndMetadata
        tp = TP(tin, 0)
        c = self._consumer(group_id=group, isolation_level="read_committed")
        p = self.k.KafkaProducer(bootstrap_servers=self.bootstrap, client_id="sluice-compat-kafka-python",
                                 transactional_id=txn_id, enable_idempotence=True, acks="all")
        try:
            c.assign([tp])
            c.seek_to_beginning(tp)
            msgs = []
            deadline = time.time() + 20
            while len(msgs) < 10 and time.time() < deadline:
                for _, ms in c.poll(500).items():
                    msgs.extend(ms)
            p.init_transactions()
            for i, commit in enumerate([True, False]):
                batch = msgs[5 * i:5 * i + 5]
                p.begin_transaction()
                futs = [p.send(tout, value=m.value.replace(b"i-", b"o-"), partition=0) for m in batch]
                p.flush(30)
                for f in futs:
                    f.get(timeout=30)
                p.send_offsets_to_transaction({tp: OAM(batch[-1].offset + 1, "", -1)}, c.group_metadata())
                if commit:
                    p.commit_transaction()
                else:
                    p.abort_transaction()
            return [m.value for m in msgs], c.committed(tp, timeout_ms=20000)
        finally:
            p.close(10)
            c.close()

    def txn_fencing(self, topic, txn_id):
        """As Confluent.txn_fencing."""
        mk = lambda: self.k.KafkaProducer(bootstrap_servers=self.bootstrap, client_id="sluice-compat-kafka-python",  # noqa: E731
                                          transactional_id=txn_id, enable_idempotence=True, acks="all")
        a = mk()
        b = None
        try:
            a.init_transactions()
            a.begin_transaction()
            a.send(topic, value=b"f-a-0", partition=0).get(timeout=30)
            b = mk()
            b.init_transactions()
            err = None
            try:
                a.commit_transaction()
            except self.k.errors.KafkaError as e:
                err = type(e).__name__
            b.begin_transaction()
            b.send(topic, value=b"f-b-0", partition=0).get(timeout=30)
            b.commit_transaction()
            return err
        finally:
            a.close(10)
            if b is not None:
                b.close(10)

    def _admin_call(self, fn):
        a = self.admin()
        try:
            fn(a)
            return None
        except self.k.errors.KafkaError as e:
            return getattr(e, "errno", str(e))
        finally:
            a.close()

    def create_topic(self, name, partitions, configs=None):
        from kafka.admin import NewTopic
        return self._admin_call(lambda a: a.create_topics(
            [NewTopic(name, partitions, 1, topic_configs=configs or {})], raise_errors=True))

    def describe_config(self, name):
        from kafka.admin import ConfigResource, ConfigResourceType
        a = self.admin()
        try:
            # {resource_type: {resource_name: {config_key: {config data}}}}
            r = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all")
            entries = r.get("topic", {}).get(name)
            if entries is None:
                raise RuntimeError("no topic %s in %r" % (name, r))
            if not isinstance(entries, dict):
                raise RuntimeError("describe_configs: %r" % (entries,))
            return {k: (v.get("value") if isinstance(v, dict) else v) for k, v in entries.items()}
        finally:
            a.close()

    def alter_config(self, name, key, value):
        from kafka.admin import ConfigResource, ConfigResourceType
        a = self.admin()
        try:
            # {resource_type: {resource_name: Error/Result}}
            r = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs={key: value})])
            res = r.get("topic", {}).get(name)
            errno = getattr(res, "errno", 0)
            return errno or None
        except self.k.errors.KafkaError as e:
            return getattr(e, "errno", str(e))
        finally:
            a.close()

    def create_partitions(self, name, total):
        from kafka.admin import NewPartitions
        return self._admin_call(lambda a: a.create_partitions({name: NewPartitions(total)}))

    def delete_topic(self, name):
        return self._admin_call(lambda a: a.delete_topics([name]))

    def group_consumer(self, group, topic):
        return KafkaPythonMember(self, group, topic)


class KafkaPythonMember:
    def __init__(self, cl, group, topic):
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        self.c = cl._consumer(group_id=group, session_timeout_ms=10000, heartbeat_interval_ms=500,
                              partition_assignment_strategy=[RangePartitionAssignor])
        self.c.subscribe([topic])

    def poll(self, t):
        out = []
        for _, ms in self.c.poll(int(t * 1000)).items():
            for m in ms:
                out.append(Rec(m.offset, m.key, m.value, m.headers, m.timestamp))
        return out

    def assignment(self):
        return sorted(tp.partition for tp in self.c.assignment())

    def commit(self):
        self.c.commit()

    def close(self):
        self.c.close()


# ---------------------------------------------------------------- scenarios

def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def run(scenario, fn):
    try:
        detail = fn()
        if isinstance(detail, tuple) and detail[0] == "na":
            result(scenario, "na", detail[1])
        else:
            result(scenario, "pass", detail or "")
    except Exception as e:  # noqa: BLE001: every failure becomes a fail line
        traceback.print_exc(file=sys.stderr)
        result(scenario, "fail", "%s: %s" % (type(e).__name__, e))


def values(n, prefix):
    return [(("k%d" % i).encode(), ("%s-%d" % (prefix, i)).encode(), None, None, None) for i in range(n)]


def group_basic(cl, p):
    def metadata():
        topics, brokers = cl.metadata()
        check(brokers == 1, "brokers=%d, want 1" % brokers)
        check(topics.get(p + "-meta") == 3, "topic %s-meta: %r partitions, want 3" % (p, topics.get(p + "-meta")))
    run("bootstrap-metadata", metadata)

    def acks(a, idem=False, topic=None):
        def f():
            errs = cl.produce(topic, values(100, topic), acks=a, idempotent=idem)
            check(all(e is None for e in errs), "delivery errors: %r" % [e for e in errs if e][:3])
        return f
    run("produce-acks0", acks("0", topic=p + "-acks0"))
    run("produce-acks1", acks("1", topic=p + "-acks1"))
    run("produce-acksall", acks("all", topic=p + "-acksall"))
    run("produce-idempotent", acks("all", True, topic=p + "-idem"))

    def fields():
        t = p + "-fields"
        recs = [
            (b"k1", b"v1", [("h1", b"a"), ("h2", b"b")], TS_BASE, None),
            (b"k2", None, [], TS_BASE + 1, None),
            (None, b"v3", [("h3", b"")], TS_BASE + 2, None),
        ]
        errs = cl.produce(t, recs)
        check(all(e is None for e in errs), "delivery errors: %r" % errs)
        got = cl.consume(t, 0, "earliest", 3)
        check(len(got) == 3, "read %d records, want 3" % len(got))
        for want, r in zip(recs, got):
            check(r.key == want[0] and r.value == want[1] and r.ts == want[3],
                  "read %r, want key=%r value=%r ts=%r" % (r, want[0], want[1], want[3]))
            gh = [(k, v or b"") for k, v in r.headers]
            check(gh == want[2], "headers %r, want %r" % (gh, want[2]))
    run("keys-nulls-headers-timestamps", fields)

    big = p + "-big"  # max.message.bytes=100000 on this topic

    def near():
        v = b"n" * 99_000
        errs = cl.produce(big, [(b"near", v, None, None, None)], acks="all")
        check(errs == [None], "producing a 99,000-byte record under max.message.bytes=100000: %r" % errs)
        got = cl.consume(big, 0, "earliest", 1)
        check(len(got) == 1 and got[0].value == v, "did not read the record back (%d records)" % len(got))
    run("near-max-message-bytes", near)

    def over():
        errs = cl.produce(big, [(b"over", b"o" * 101_000, None, None, None)], acks="all")
        check(errs[0] == 10, "producing 101,000 bytes over max.message.bytes=100000: error %r, want 10 (MESSAGE_TOO_LARGE)" % errs[0])
    run("error-record-too-large", over)

    cons = p + "-cons"  # 10 records at TS_BASE + i*1000, written by the Go test

    def earliest():
        got = cl.consume(cons, 0, "earliest", 10)
        check([r.value for r in got] == [b"c-%d" % i for i in range(10)], "read %r" % got)
    run("consume-earliest", earliest)

    def latest():
        got = cl.consume(cons, 0, "latest", 1, on_assigned=lambda: cl.produce(
            cons, [(None, b"after-latest", None, TS_BASE + 100_000, None)]))
        check(len(got) == 1 and got[0].value == b"after-latest" and got[0].offset == 10, "read %r" % got)
    run("consume-latest", latest)

    def by_time():
        off = cl.offset_for_time(cons, 0, TS_BASE + 4500)
        check(off == 5, "offset for timestamp base+4500: %r, want 5" % off)
        got = cl.consume(cons, 0, ("ts", TS_BASE + 4500), 3)
        check([r.value for r in got[:3]] == [b"c-5", b"c-6", b"c-7"], "read %r" % got)
    run("consume-timestamp", by_time)

    def unknown():
        code = cl.topic_error(p + "-no-such-topic")
        check(code == 3, "metadata for a missing topic (auto-create off): error %r, want 3 (UNKNOWN_TOPIC_OR_PARTITION)" % code)
    run("error-unknown-topic", unknown)

    def txn():
        # PREFIX-txn (1 partition, created by the Go test): a transaction
        # of c-0..c-4 committed, one of a-0..a-4 aborted, one of c-5..c-9
        # committed; a read_committed consumer reads exactly c-0..c-9.
        t = p + "-txn"
        cl.transactions(t, [([b"c-%d" % i for i in range(5)], True), ([b"a-%d" % i for i in range(5)], False),
                            ([b"c-%d" % i for i in range(5, 10)], True)])
        got = cl.consume(t, 0, "earliest", 10, **cl.read_committed)
        check([r.value for r in got] == [b"c-%d" % i for i in range(10)],
              "read_committed read %r, want c-0..c-9" % [r.value for r in got])
    run("txn-commit-abort", txn)

    def txn_offsets():
        # txn-offsets (the Go test's prepareTxn): a consumer of group
        # PREFIX-txo-g reads i-0..i-9 of PREFIX-txo-in; a transaction
        # writes o-0..o-4 to PREFIX-txo-out with offset 5 for the group
        # and commits, the next o-5..o-9 with offset 10 and aborts. The
        # group's committed offset is then 5 and a read_committed consumer
        # reads o-0..o-4.
        tin, tout = p + "-txo-in", p + "-txo-out"
        read, committed = cl.txn_offsets(tin, tout, p + "-txo-g", p + "-txo-tid")
        check(read == [b"i-%d" % i for i in range(10)], "read %r from %s, want i-0..i-9" % (read, tin))
        check(committed == 5, "committed offset of %s/0: %r, want 5" % (tin, committed))
        got = cl.consume(tout, 0, "earliest", 5, **cl.read_committed)
        check([r.value for r in got] == [b"o-%d" % i for i in range(5)],
              "read_committed read %r, want o-0..o-4" % [r.value for r in got])
    run("txn-offsets", txn_offsets)

    def txn_fencing():
        # txn-fencing (prepareTxn): producer A (PREFIX-txf-tid) writes
        # f-a-0 in an open transaction; B initializes with the same id,
        # fencing A, whose commit fails with the client's fenced error; B
        # writes f-b-0 and commits; read_committed reads f-b-0 only.
        t = p + "-txf"
        err = cl.txn_fencing(t, p + "-txf-tid")
        check(err == cl.fenced_error, "A's commit after B initialized: %r, want %s" % (err, cl.fenced_error))
        got = cl.consume(t, 0, "earliest", 1, **cl.read_committed)
        check([r.value for r in got] == [b"f-b-0"], "read_committed read %r, want f-b-0" % [r.value for r in got])
        return err
    run("txn-fencing", txn_fencing)


def group_admin(cl, p):
    t = p + "-adm"

    def create():
        err = cl.create_topic(t, 2, {"retention.ms": "3600000"})
        check(err is None, "create: error %r" % err)
        topics, _ = cl.metadata()
        check(topics.get(t) == 2, "after create: %r partitions" % topics.get(t))
        err = cl.create_topic(t, 2)
        check(err == 36, "create again: error %r, want 36 (TOPIC_ALREADY_EXISTS)" % err)
    run("admin-create", create)

    def describe():
        cfg = cl.describe_config(t)
        check(cfg.get("retention.ms") == "3600000", "retention.ms=%r" % cfg.get("retention.ms"))
        check("cleanup.policy" in cfg, "no cleanup.policy in %d entries" % len(cfg))
    run("admin-describe-configs", describe)

    def alter():
        err = cl.alter_config(t, "retention.ms", "7200000")
        check(err is None, "alter: error %r" % err)
        cfg = cl.describe_config(t)
        check(cfg.get("retention.ms") == "7200000", "after alter retention.ms=%r" % cfg.get("retention.ms"))
    run("admin-alter-configs", alter)

    def partitions():
        err = cl.create_partitions(t, 4)
        check(err is None, "create partitions: error %r" % err)
        deadline = time.time() + 10
        while True:
            topics, _ = cl.metadata()
            if topics.get(t) == 4 or time.time() > deadline:
                break
            time.sleep(0.2)
        check(topics.get(t) == 4, "after create partitions: %r partitions" % topics.get(t))
    run("admin-create-partitions", partitions)

    def delete():
        err = cl.delete_topic(t)
        check(err is None, "delete: error %r" % err)
        deadline = time.time() + 10
        while True:
            topics, _ = cl.metadata()
            if t not in topics or time.time() > deadline:
                break
            time.sleep(0.2)
        check(t not in topics, "topic still listed after delete")
    run("admin-delete", delete)

    def bad_config():
        err = cl.create_topic(p + "-bad", 1, {"retention.ms": "soon"})
        check(err == 40, "create with retention.ms=soon: error %r, want 40 (INVALID_CONFIG)" % err)
    run("error-bad-config", bad_config)


def group_groups(cl, p):
    t = p + "-grp"  # 4 partitions, 40 records written by the Go test (10 per partition)
    g = p + "-g1"

    def resume():
        m = cl.group_consumer(g, t)
        got = []
        deadline = time.time() + 30
        while len(got) < 40 and time.time() < deadline:
            got += m.poll(0.5)
        check(len(got) == 40, "first member read %d of 40" % len(got))
        m.commit()
        m.close()
        cl.produce(t, [(b"k", b"after-%d" % i, None, None, i % 4) for i in range(4)])
        m = cl.group_consumer(g, t)
        got = []
        deadline = time.time() + 30
        while len(got) < 4 and time.time() < deadline:
            got += m.poll(0.5)
        end = time.time() + 1.5
        while time.time() < end:  # nothing older must follow
            got += m.poll(0.2)
        m.close()
        vals = sorted(r.value for r in got)
        check(vals == sorted(b"after-%d" % i for i in range(4)), "resumed member read %r" % vals[:8])
    run("group-commit-resume", resume)

    def rebalance():
        g2 = p + "-g2"
        a = cl.group_consumer(g2, t)
        deadline = time.time() + 30
        while a.assignment() != [0, 1, 2, 3] and time.time() < deadline:
            a.poll(0.2)
        check(a.assignment() == [0, 1, 2, 3], "single member holds %r" % a.assignment())
        b = cl.group_consumer(g2, t)
        deadline = time.time() + 40
        while time.time() < deadline:
            a.poll(0.1)
            b.poll(0.1)
            ab, bb = a.assignment(), b.assignment()
            if len(ab) == 2 and len(bb) == 2 and sorted(ab + bb) == [0, 1, 2, 3]:
                break
        ab, bb = a.assignment(), b.assignment()
        check(len(ab) == 2 and len(bb) == 2 and sorted(ab + bb) == [0, 1, 2, 3], "after join: %r and %r" % (ab, bb))
        b.close()
        deadline = time.time() + 30
        while a.assignment() != [0, 1, 2, 3] and time.time() < deadline:
            a.poll(0.2)
        check(a.assignment() == [0, 1, 2, 3], "after leave: %r" % a.assignment())
        a.close()
    run("group-rebalance", rebalance)


def group_write_codecs(cl, p):
    for codec in CODECS:
        def f(codec=codec):
            recs = [codec_record(cl.name, codec, i) for i in range(CODEC_RECORDS)]
            errs = cl.produce("%s-%s" % (p, codec), [(k, v, h, None, None) for k, v, h in recs],
                              compression=codec, linger=50)
            check(all(e is None for e in errs), "delivery errors: %r" % [e for e in errs if e][:3])
        run("write-" + codec, f)


def group_read_codecs(cl, topics):
    for t in topics:
        def f(t=t):
            got = cl.consume(t, 0, "earliest", CODEC_RECORDS, timeout=20)
            check(len(got) == CODEC_RECORDS, "read %d of %d" % (len(got), CODEC_RECORDS))
            return digest([(r.key, r.value, r.headers) for r in got])
        run("read " + t, f)


def main():
    client, group, bootstrap, prefix = sys.argv[1:5]
    rest = sys.argv[5:]
    try:
        cl = {"confluent": Confluent, "kafka-python": KafkaPython}[client](bootstrap)
    except ImportError as e:
        print("IMPORT-ERROR %s" % e, flush=True)
        sys.exit(3)
    print("VERSION %s" % cl.version, flush=True)
    if group == "basic":
        group_basic(cl, prefix)
    elif group == "admin":
        group_admin(cl, prefix)
    elif group == "group":
        group_groups(cl, prefix)
    elif group == "write-codecs":
        group_write_codecs(cl, prefix)
    elif group == "read-codecs":
        group_read_codecs(cl, rest)
    else:
        sys.exit("unknown group %s" % group)


if __name__ == "__main__":
    main()
