package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterMetaBackupRestore is the procedure of docs/operations.md,
// "Metastore backup and restore", on the 3 meta + 3 write + 1 read
// cluster: `sluice meta backup` from a serving meta node; every meta node
// is then lost with its data; `sluice meta restore` rebuilds the first
// from the backup, it starts alone, the two others join it empty
// (meta.join) through `sluice meta add-voter`. The brokers, which kept
// running, serve the topic again, its group's committed offsets are the
// backup's, and the metastore takes new writes (a new topic).
func TestClusterMetaBackupRestore(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestCluster(t, "raft")
	const topic, group, parts, n = "kept", "g-kept", 2, 200
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	fillTopic(ctx, t, c.writeAddrs, topic, parts, n, "k%04d")
	rcl, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	radm := kadm.NewClient(rcl)
	ends, err := radm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	commit := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) { commit.AddOffset(topic, o.Partition, o.Offset/2, -1) })
	if resp, err := radm.CommitOffsets(ctx, group, commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	backup := filepath.Join(t.TempDir(), "meta.backup")
	out := sluiceCmd(t, "meta", "backup", backup, "--admin", c.meta[0].admin)
	if !strings.Contains(out, "1 topics, 4 brokers") {
		t.Fatalf("sluice meta backup:\n%s", out)
	}
	t.Log(strings.TrimSpace(out))

	// Every meta node is lost, with its data.
	for _, m := range c.meta {
		m.kill()
		if err := os.RemoveAll(dataDir(t, m)); err != nil {
			t.Fatal(err)
		}
	}
	out = sluiceCmd(t, "meta", "restore", "--config", c.meta[0].cfg, "--from", backup)
	t.Log(strings.TrimSpace(out))
	c.meta[0].start(t)
	waitReady(t, c.meta[0].admin, 30*time.Second)
	for i, m := range c.meta[1:] {
		f, err := os.OpenFile(m.cfg, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("meta.join: true\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
		m.start(t)
		sluiceCmd(t, "meta", "add-voter", fmt.Sprint(i+2), configValue(t, m.cfg, "meta.listen"), "--admin", c.meta[0].admin)
		waitReady(t, m.admin, 30*time.Second)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + c.meta[0].admin + "/meta/status")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Leader  uint64
		Members map[string]string
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || len(st.Members) != 3 || st.Leader == 0 {
		t.Fatalf("quorum after the restore: %+v %v", st, err)
	}

	// The brokers serve the topic, the group's offsets are the backup's,
	// and the metastore takes writes.
	wcl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	wadm := kadm.NewClient(wcl)
	waitLeaders(t, wadm, topic, parts)
	if err := wcl.ProduceSync(ctx, &kgo.Record{Value: []byte("after-restore")}).FirstErr(); err != nil {
		t.Fatalf("produce after the restore: %v", err)
	}
	eventually(t, 30*time.Second, func() error {
		got, err := radm.FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		for p, want := range commit[topic] {
			if o, ok := got.Lookup(topic, p); !ok || o.At != want.At {
				return fmt.Errorf("partition %d: committed offset %+v after the restore, %d before", p, o, want.At)
			}
		}
		return nil
	})
	if _, err := wadm.CreateTopic(ctx, 1, 3, nil, "fresh"); err != nil {
		t.Fatalf("create a topic after the restore: %v", err)
	}
	waitLeaders(t, wadm, "fresh", 1)
}
