package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterCompaction: a topic with cleanup.policy=compact and small
// segments on the 3 meta + 3 write + 2 read cluster. Keyed records are
// produced in rounds (some keys end with a tombstone; a transaction is
// aborted, another committed), then records of
// fresh keys push the rounds out of the active segment; every replica,
// the three raft voters and both read brokers (learners), cleans its own
// copy, and each is then read with Fetch from that broker alone until it
// holds exactly the latest record of every key at the key's offset, none
// of the aborted transaction's. One
// read broker is down meanwhile and catches up afterwards from its
// leader's cleaned log. A record without a key is refused with
// INVALID_RECORD.
func TestClusterCompaction(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterLayout(t, "raft", 2, clusterLayout{extra: "log.cleaner.backoff.ms: 100\n"})
	const topic, keys, rounds, pad = "compacted", 40, 15, 40
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	adm := kadm.NewClient(prod)
	cfg := map[string]*string{
		"cleanup.policy":            new("compact"),
		"segment.bytes":             new("2048"),
		"min.cleanable.dirty.ratio": new("0.01"),
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, cfg, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, topic, 1)
	// One read broker is down while the records are produced and the
	// others clean: when it comes back its leader sends it entries it
	// no longer caches, read from its cleaned log.
	late := c.readers[1]
	late.kill()

	// want: key -> (offset, value) of its latest record; "" is a tombstone.
	type latest struct {
		off   int64
		value *string
	}
	want := map[string]latest{}
	produce := func(key string, value *string) {
		r := &kgo.Record{Key: []byte(key)}
		if value != nil {
			r.Value = []byte(*value)
		}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", key, err)
		}
		want[key] = latest{r.Offset, value}
	}
	for round := 0; round < rounds; round++ {
		for k := 0; k < keys; k++ {
			v := fmt.Sprintf("k%02d-round%02d-%s", k, round, strings.Repeat("x", 20))
			produce(fmt.Sprintf("k%02d", k), &v)
		}
	}
	// Transactions: the cleaner removes an aborted one's records (a new
	// key and a later value of k01, which must not supersede k01's
	// committed one) and keeps a committed one's.
	txp, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.TransactionalID("compaction-test"), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer txp.Close()
	for _, commit := range []bool{false, true} {
		if err := txp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		recs := []*kgo.Record{{Key: []byte("txn-aborted"), Value: []byte("aborted")}, {Key: []byte("k01"), Value: []byte("aborted")}}
		if commit {
			recs = []*kgo.Record{{Key: []byte("txn-committed"), Value: []byte("committed")}}
		}
		if err := txp.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("transactional produce: %v", err)
		}
		if err := txp.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("ending the transaction: %v", err)
		}
		if commit {
			v := "committed"
			want["txn-committed"] = latest{recs[0].Offset, &v}
		}
	}
	for k := 0; k < keys; k += 10 {
		produce(fmt.Sprintf("k%02d", k), nil) // tombstones, kept for delete.retention.ms (a day)
	}
	for i := 0; i < pad; i++ {
		v := fmt.Sprintf("pad-%03d-%s", i, strings.Repeat("y", 40))
		produce(fmt.Sprintf("pad%03d", i), &v)
	}

	// Compacted topics refuse records without a key.
	err = prod.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("record without a key on a compacted topic: %v, want INVALID_RECORD", err)
	}

	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	id := md.Topics[topic].ID
	total := rounds*keys + 3 + keys/10 + pad
	check := func(name, addr string) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		var last string
		ok := false
		for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			recs, err := fetchAll(ctx, cl, topic, id)
			if err != nil {
				last = err.Error()
				continue
			}
			got := map[string]latest{}
			dup := ""
			for _, r := range recs {
				if _, seen := got[string(r.Key)]; seen {
					dup = string(r.Key)
				}
				var v *string
				if r.Value != nil {
					s := string(r.Value)
					v = &s
				}
				got[string(r.Key)] = latest{r.Offset, v}
			}
			switch {
			case dup != "":
				last = fmt.Sprintf("%d records of %d produced, key %s still more than once", len(recs), total, dup)
			case len(got) != len(want):
				last = fmt.Sprintf("%d keys, want %d", len(got), len(want))
			default:
				last = ""
				for k, w := range want {
					g := got[k]
					if g.off != w.off || (g.value == nil) != (w.value == nil) || (g.value != nil && *g.value != *w.value) {
						last = fmt.Sprintf("key %s: offset %d, want %d", k, g.off, w.off)
						break
					}
				}
				ok = last == ""
			}
			if ok {
				break
			}
		}
		cl.Close()
		if !ok {
			t.Fatalf("%s never held exactly the latest record of each key: %s", name, last)
		}
		t.Logf("%s: %d survivors of %d records", name, len(want), total)
	}
	for i, a := range c.writeAddrs {
		check(fmt.Sprintf("write-%d", i+1), a)
	}
	check("read-1", c.readAddrs[0])
	late.start(t)
	waitReady(t, late.admin, 60*time.Second)
	check("read-2 (restarted)", c.readAddrs[1])
}

// fetchRecord is a record read back with its absolute offset.
type fetchRecord struct {
	Offset     int64
	Key, Value []byte
}

// fetchAll reads partition 0 of topic from the seed broker's own replica
// with Fetch, from the log start to the high watermark, and returns the
// records of its data batches (uncompressed ones: the test produces
// those). A compacted log may end with removed offsets below the high
// watermark; reading stops when a response has no batch.
func fetchAll(ctx context.Context, cl *kgo.Client, topic string, id [16]byte) ([]fetchRecord, error) {
	var out []fetchRecord
	for offset := int64(0); ; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 8<<20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = 0, offset, -1, 8<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := cl.SeedBrokers()[0].Request(rctx, req)
		cancel()
		if err != nil {
			return nil, err
		}
		fr := resp.(*kmsg.FetchResponse)
		if fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			return nil, fmt.Errorf("fetch at %d: error %d", offset, fr.ErrorCode)
		}
		sp := fr.Topics[0].Partitions[0]
		if sp.ErrorCode != 0 {
			return nil, fmt.Errorf("fetch at %d: %v", offset, kerr.ErrorForCode(sp.ErrorCode))
		}
		b := sp.RecordBatches
		if offset >= sp.HighWatermark || len(b) == 0 {
			return out, nil
		}
		for len(b) >= 12 {
			var batch kmsg.RecordBatch
			size := 12 + int(int32(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11])))
			if size > len(b) {
				break
			}
			if err := batch.ReadFrom(b[:size]); err != nil {
				return nil, fmt.Errorf("batch at %d: %v", offset, err)
			}
			b = b[size:]
			offset = batch.FirstOffset + int64(batch.LastOffsetDelta) + 1
			if batch.Attributes&0x20 != 0 {
				continue // control batch
			}
			if batch.Attributes&0x07 != 0 {
				return nil, fmt.Errorf("batch at %d is compressed", batch.FirstOffset)
			}
			rb := batch.Records
			for range batch.NumRecords {
				var r kmsg.Record
				n, err := readRecord(rb, &r)
				if err != nil {
					return nil, fmt.Errorf("batch at %d: %v", batch.FirstOffset, err)
				}
				rb = rb[n:]
				out = append(out, fetchRecord{Offset: batch.FirstOffset + int64(r.OffsetDelta), Key: r.Key, Value: r.Value})
			}
		}
	}
}

// readRecord decodes the record at the start of b (its length varint
// first) and returns how many bytes it took.
func readRecord(b []byte, r *kmsg.Record) (int, error) {
	l, n := binary.Varint(b)
	if n <= 0 || l < 0 || int64(len(b)-n) < l {
		return 0, fmt.Errorf("bad record length")
	}
	if err := r.ReadFrom(b[:n+int(l)]); err != nil {
		return 0, err
	}
	return n + int(l), nil
}
