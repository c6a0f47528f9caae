package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSharedClusterDiskCache: a read broker whose in-memory chunk cache
// (1 MiB) is far too small for a topic's history (6 MB) serves that
// history from the cache's disk tier. The split cluster (3 meta, 3 write,
// 1 read broker on one shared directory): a consumer of the read view
// reads the whole history once (the read broker reads each chunk from
// shared storage: GETs), and again with no GET at all, every chunk from
// disk; killed with SIGKILL and restarted with its data directory, the
// read broker serves it all from disk again, no GET; restarted with its
// data directory emptied (the disk lost), it reads from shared storage
// again and serves every record.
func TestSharedClusterDiskCache(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	readerData := t.TempDir()
	c := startTestClusterLayout(t, "shared", 1, clusterLayout{
		extra: fmt.Sprintf("shared.storage.type: dir\nshared.storage.dir: %s\nshared.upload.linger.ms: 20\n", t.TempDir()),
		brokerExtra: func(id int) string {
			if id == 4 {
				return "shared.cache.memory.bytes: 1048576\nshared.cache.disk.bytes: 67108864\n"
			}
			return ""
		},
		dataDir: func(name string) string {
			if name == "read-1" {
				return readerData
			}
			return ""
		},
	})
	reader := c.readers[0]
	const topic, parts, n = "sdisk", 2, 6000
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchMaxBytes(64<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("d", 1000)
	for i := 0; i < n; i++ {
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%06d-%s", i, pad))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	type counts struct{ gets, memHits, diskHits, diskWrites, memBytes, diskBytes float64 }
	scrape := func() counts {
		return counts{
			gets:       metricValue(t, reader.admin, "sluice_shared_gets_total"),
			memHits:    metricValue(t, reader.admin, "sluice_shared_cache_memory_hits_total"),
			diskHits:   metricValue(t, reader.admin, "sluice_shared_cache_disk_hits_total"),
			diskWrites: metricValue(t, reader.admin, "sluice_shared_cache_disk_writes_total"),
			memBytes:   metricValue(t, reader.admin, "sluice_shared_cache_bytes"),
			diskBytes:  metricValue(t, reader.admin, "sluice_shared_cache_disk_bytes"),
		}
	}
	// settled waits until the disk tier wrote what was queued (its
	// writes stop changing).
	settled := func() counts {
		prev := scrape()
		for i := 0; i < 50; i++ {
			time.Sleep(200 * time.Millisecond)
			cur := scrape()
			if cur == prev {
				return cur
			}
			prev = cur
		}
		return prev
	}
	restart := func() {
		reader.kill()
		reader.start(t)
		waitReady(t, reader.admin, 60*time.Second)
	}

	readEverything(ctx, t, c.readAddrs, topic, n)
	first := settled()
	t.Logf("first read: %+v", first)
	if first.gets == 0 || first.diskWrites == 0 {
		t.Fatalf("first read: %v GETs, %v chunks written to disk", first.gets, first.diskWrites)
	}
	if first.memBytes > 1<<20 || first.diskBytes < 6e6 {
		t.Fatalf("first read: %v bytes in memory (bound 1 MiB), %v on disk (history over 6 MB)", first.memBytes, first.diskBytes)
	}

	readEverything(ctx, t, c.readAddrs, topic, n)
	second := settled()
	t.Logf("second read: %+v", second)
	if second.gets != first.gets || second.diskHits-first.diskHits < first.gets/2 {
		t.Fatalf("second read: %v more GETs, %v disk hits (the first read made %v GETs)", second.gets-first.gets, second.diskHits-first.diskHits, first.gets)
	}

	restart()
	readEverything(ctx, t, c.readAddrs, topic, n)
	third := settled()
	t.Logf("after a restart: %+v", third)
	if third.gets != 0 || third.diskHits < first.gets/2 {
		t.Fatalf("after a restart: %v GETs, %v disk hits", third.gets, third.diskHits)
	}

	// The disk lost: every file the read broker wrote is deleted, the
	// directory itself left empty. Nothing is copied to it before it
	// serves: the first read comes from shared storage.
	reader.kill()
	entries, err := os.ReadDir(readerData)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(readerData, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if left, err := os.ReadDir(readerData); err != nil || len(left) != 0 {
		t.Fatalf("data directory not empty: %v, %v", left, err)
	}
	restart()
	readEverything(ctx, t, c.readAddrs, topic, n)
	fourth := settled()
	t.Logf("after a restart on an empty data directory: %+v", fourth)
	if fourth.gets == 0 || fourth.diskWrites == 0 {
		t.Fatalf("data directory emptied: %v GETs, %v written to disk", fourth.gets, fourth.diskWrites)
	}
}
