package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestComposeClusterInNamespaces runs the services of
// deploy/compose/compose.yaml as their containers would run them, without
// a container engine: each process in a network namespace of its own on
// one bridge (the compose network), resolving the other services by name
// through an /etc/hosts of its namespace (ip netns exec mounts
// /etc/netns/<namespace>/hosts over it), with the service's config file
// and environment. Only the data directory is moved (the image's volume
// path is not writable here) and the published ports are renumbered to
// free ones, forwarded from 127.0.0.1 by the test as docker's port
// publishing does, with the advertised addresses following them. Then a
// client on the host's side creates a replicated topic through the write
// listeners, produces with acks=all, and a consumer group reads every
// record back through the read listeners.
//
// Needs root and iproute2 (the network-partition test's netLab); about
// 15 s.
func TestComposeClusterInNamespaces(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	services, files := loadCompose(t)
	var names []string
	for name := range services {
		names = append(names, name)
	}
	// Meta nodes first, as depends_on starts them.
	sort.Slice(names, func(i, j int) bool {
		mi, mj := strings.HasPrefix(names[i], "meta"), strings.HasPrefix(names[j], "meta")
		if mi != mj {
			return mi
		}
		return names[i] < names[j]
	})
	lab := newNetLab(t)
	hosts := "127.0.0.1 localhost\n"
	for _, name := range names {
		h := lab.host(t, name)
		hosts += h.addr + " " + name + "\n"
	}
	for _, name := range names {
		dir := filepath.Join("/etc/netns", lab.hosts[name].ns)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			skipMissing(t, "cannot give namespaces their /etc/hosts: "+err.Error())
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Published ports: host port -> a forwarder on a free port.
	hostPort := map[string]string{} // compose host port -> the forwarder's port
	kafka := map[string][]string{}  // view -> forwarded listener addresses
	admin := map[string]string{}    // service -> forwarded admin address
	for _, name := range names {
		for _, p := range services[name].Ports {
			parts := strings.Split(p, ":") // 127.0.0.1:HOST:CONTAINER
			fwd := forwardTCP(t, net.JoinHostPort(lab.hosts[name].addr, parts[2]))
			_, port, _ := net.SplitHostPort(fwd)
			hostPort[parts[1]] = port
			if parts[2] == "9644" {
				admin[name] = fwd
			}
		}
	}
	dataRoot := t.TempDir()
	var procs []*exec.Cmd
	t.Cleanup(func() {
		for _, c := range procs {
			c.Process.Signal(syscall.SIGKILL)
			c.Wait()
		}
	})
	logs := map[string]string{}
	for _, name := range names {
		env := []string{"SLUICE_DATA_DIR=" + filepath.Join(dataRoot, name)}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "SLUICE_") {
				env = append(env, kv)
			}
		}
		for k, v := range services[name].Environment {
			if k == "SLUICE_ADVERTISED_LISTENERS" {
				var items []string
				for _, item := range strings.Split(v, ",") {
					prefix, addr, _ := strings.Cut(item, "://")
					host, port, _ := net.SplitHostPort(addr)
					if hostPort[port] == "" {
						t.Fatalf("%s advertises %s, which it does not publish", name, item)
					}
					items = append(items, prefix+"://"+net.JoinHostPort(host, hostPort[port]))
					view := strings.ToLower(prefix)
					kafka[view] = append(kafka[view], net.JoinHostPort(host, hostPort[port]))
				}
				v = strings.Join(items, ",")
			}
			env = append(env, k+"="+v)
		}
		logs[name] = filepath.Join(dataRoot, name+".log")
		logf, err := os.Create(logs[name])
		if err != nil {
			t.Fatal(err)
		}
		defer logf.Close()
		prefix := lab.exec(name)
		cmd := exec.Command(prefix[0], append(prefix[1:], binPath, "serve", "--config", files[name], "--log-format", "json")...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	defer func() {
		if t.Failed() {
			for _, name := range names {
				b, _ := os.ReadFile(logs[name])
				t.Logf("%s log:\n%s", name, tail(b, 2000))
			}
		}
	}()
	for _, name := range names {
		waitReady(t, admin[name], 60*time.Second)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wcl, err := kgo.NewClient(kgo.SeedBrokers(kafka["write"]...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	const topic, parts, records = "compose", 3, 300
	if _, err := kadm.NewClient(wcl).CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, kadm.NewClient(wcl), topic, parts)
	var wg sync.WaitGroup
	var produceErr error
	var mu sync.Mutex
	for i := range records {
		wg.Add(1)
		wcl.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%03d", i)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				produceErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if produceErr != nil {
		t.Fatalf("acks=all produce through the write listeners: %v", produceErr)
	}

	rcl, err := kgo.NewClient(kgo.SeedBrokers(kafka["read"]...), kgo.ConsumerGroup("compose-readers"),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	seen := map[string]bool{}
	for len(seen) < records && ctx.Err() == nil {
		fs := rcl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Logf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if len(seen) != records {
		t.Fatalf("the read listeners gave %d of the %d records", len(seen), records)
	}
	if err := rcl.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("committing the group's offsets on a read broker: %v", err)
	}
}

// forwardTCP accepts on a free port of 127.0.0.1 and relays each
// connection to target, as a published container port is; it returns
// the address it accepts on.
func forwardTCP(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, add bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if add && conns == nil {
			return false // closing
		}
		if add {
			conns[c] = true
		} else {
			delete(conns, c)
		}
		return true
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", target, 2*time.Second)
			if err != nil || !track(in, true) || !track(out, true) {
				in.Close()
				if out != nil {
					out.Close()
				}
				continue
			}
			for _, dir := range [][2]net.Conn{{in, out}, {out, in}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					io.Copy(dir[0], dir[1])
					dir[0].Close()
					dir[1].Close()
					track(dir[0], false)
					track(dir[1], false)
				}()
			}
		}
	}()
	return ln.Addr().String()
}
