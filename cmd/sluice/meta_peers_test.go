package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestClusterForgedMetaPeer: connections to a meta follower's metastore
// port from loopback (so the address check passes) claim to be the
// quorum's leader and send what etcd raft would panic on or the apply
// loop would stop on: a heartbeat committing far past the log in the
// current term, another from a term nobody reached, an append whose
// entry does not decode with a commit index that would apply it. Others
// declare huge frames: a raft frame of about 256 MiB from the leader's
// id that sends 4 MiB of it and stalls, a 1 GiB request frame, a raft
// frame too large for a connection that never named a member. A
// franz-go producer keeps getting acks throughout, the meta node counts
// each refusal in sluice_metastore_refused_total, stays up, and its
// resident memory stays bounded; the other meta nodes refuse nothing.
// Costs about 15 s (6 processes).
func TestClusterForgedMetaPeer(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 0)
	const topic = "meta-forged"
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, topic, 3)

	// A producer that keeps going, counting acks, for the whole attack.
	var acks, fails atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	stopProducing := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}
	defer stopProducing()
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte(fmt.Sprintf("v%05d", i))}).FirstErr()
			pcancel()
			if err != nil {
				fails.Add(1)
				t.Logf("produce %d: %v", i, err)
			} else {
				acks.Add(1)
			}
		}
	}()

	for acks.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("no produce acknowledged before the attack")
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := metaTermStatus(t, c.meta[0].admin)
	lead := st.Leader
	victimID := lead%3 + 1
	victim := c.meta[victimID-1]
	vst := metaTermStatus(t, victim.admin)
	addr := configValue(t, victim.cfg, "meta.listen")
	pid := victim.cmd.Process.Pid
	rss0 := residentKiB(t, pid)
	acks0 := acks.Load()

	msg := func(typ raftpb.MessageType, term uint64) *raftpb.Message {
		return &raftpb.Message{Type: new(typ), From: new(lead), To: new(victimID), Term: new(term)}
	}
	hb := msg(raftpb.MsgHeartbeat, vst.Term)
	hb.Commit = new(uint64(1) << 40)
	nowhere := msg(raftpb.MsgHeartbeat, vst.Term+1000)
	nowhere.Commit = new(uint64(1) << 40)
	junk := msg(raftpb.MsgApp, vst.Term)
	junk.Index, junk.LogTerm, junk.Commit = new(vst.Commit), new(vst.Term), new(vst.Commit+1)
	junk.Entries = []*raftpb.Entry{{Index: new(vst.Commit + 1), Term: new(vst.Term), Data: []byte("not a command")}}
	metaDial(t, addr, metaRaftFrame(t, hb, nowhere, junk))

	// Huge declared frames. The first names the leader in its first
	// message, so the connection may send a large frame; it sends 4 MiB
	// of it and stalls.
	big := metaRaftFrame(t, hb)
	head := binary.BigEndian.AppendUint32(nil, 256<<20-1)
	head = append(head, big[4:]...)
	var stalled []net.Conn
	for range 8 {
		stalled = append(stalled, metaDial(t, addr, append(head, make([]byte, 4<<20)...)))
	}
	time.Sleep(time.Second) // the 32 MiB sent are read
	rss := residentKiB(t, pid)
	request := metaDial(t, addr, append([]byte{0x40, 0, 0, 0, 2}, make([]byte, 64)...))
	unbound := metaDial(t, addr, append([]byte{0x08, 0, 0, 0, 1}, make([]byte, 64)...))
	for _, conn := range []net.Conn{request, unbound} {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
			t.Fatalf("refused connection not closed: %v", err)
		}
	}

	want := map[string]float64{"commit_past_log": 2, "entries": 1, "frame": 2}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := labelledMetric(t, victim.admin, "sluice_metastore_refused_total", "reason")
		missing := ""
		for k, v := range want {
			if got[k] < v {
				missing += fmt.Sprintf(" %s=%v<%v", k, got[k], v)
			}
		}
		if missing == "" {
			t.Logf("refused: %v", got)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refusals counted %v:%s", got, missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Acks go on while the stalled frames are held.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
	}
	if acks.Load() <= acks0 {
		t.Fatalf("no produce acknowledged during the attack (%d before, %d after)", acks0, acks.Load())
	}
	t.Logf("meta node %d resident: %d KiB before, %d KiB with 8 stalled 256 MiB frames; peak %s; acks %d -> %d, failed %d",
		victimID, rss0, rss, peakRSS(pid), acks0, acks.Load(), fails.Load())
	if rss-rss0 > 128<<10 {
		t.Fatalf("resident memory grew by %d KiB under the attack", rss-rss0)
	}
	if exited(pid) || victim.cmd.ProcessState != nil {
		t.Fatalf("meta node %d exited", victimID)
	}
	if got := metaTermStatus(t, victim.admin); got.Leader != lead || got.Term != vst.Term {
		t.Fatalf("meta node %d: leader %d term %d after the forgeries, was %d and %d", victimID, got.Leader, got.Term, lead, vst.Term)
	}
	for _, s := range stalled {
		s.Close()
	}
	stopProducing()
	if fails.Load() != 0 {
		t.Fatalf("%d produce requests failed", fails.Load())
	}
	// The quorum still commits: a new topic.
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic+"-after"); err != nil {
		t.Fatal(err)
	}
	// The other members, which got only honest traffic, refused nothing.
	for i, m := range c.meta {
		if uint64(i+1) == victimID {
			continue
		}
		for reason, v := range labelledMetric(t, m.admin, "sluice_metastore_refused_total", "reason") {
			if v != 0 {
				t.Errorf("meta node %d refused %v as %s, with honest traffic only", i+1, v, reason)
			}
		}
	}
}

type metaStatusJSON struct {
	Leader, Term, Commit uint64
}

func metaTermStatus(t *testing.T, admin string) metaStatusJSON {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + admin + "/meta/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st metaStatusJSON
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.Leader == 0 {
		t.Fatalf("meta status %+v: %v", st, err)
	}
	return st
}

// metaRaftFrame encodes msgs as the metastore port frames a raft batch:
// length | kind 1 | repeated (length | message).
func metaRaftFrame(t *testing.T, msgs ...*raftpb.Message) []byte {
	t.Helper()
	body := []byte{1}
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		body = binary.BigEndian.AppendUint32(body, uint32(len(b)))
		body = append(body, b...)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func metaDial(t *testing.T, addr string, b []byte) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	return c
}

// residentKiB is the process's VmRSS.
func residentKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
