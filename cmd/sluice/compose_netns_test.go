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
	var specs []nsProc
	for _, name := range names {
		env := map[string]string{}
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
			env[k] = v
		}
		specs = append(specs, nsProc{name: name, file: files[name], env: env, admin: admin[name]})
	}
	runInNamespaces(t, lab, hosts, specs)

	roundTrip(t, "compose", kafka["write"], kafka["read"])
}

// roundTrip creates topic (3 partitions, 3 replicas) through the write
// listeners at write, produces 300 records with acks=all there, and reads
// every one back with a consumer group through the read listeners at
// read, committing its offsets on a read broker. opts are added to both
// clients (a dialer, say).
func roundTrip(t *testing.T, topic string, write, read []string, opts ...kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wcl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(write...), kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	const parts, records = 3, 300
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

	rcl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(read...), kgo.ConsumerGroup(topic + "-readers"),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
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

// nsProc is one sluice process for runInNamespaces: its lab host, config
// file, environment (SLUICE_DATA_DIR is added) and admin address.
type nsProc struct {
	name, file, admin string
	env               map[string]string
}

// runInNamespaces gives every host of lab the same /etc/hosts (ip netns
// exec mounts /etc/netns/<namespace>/hosts over it), starts each process
// in its host's namespace with `sluice serve --config`, waits until every
// one is ready, and kills them all when the test ends. A failed test logs
// the end of each process's log.
func runInNamespaces(t *testing.T, lab *netLab, hosts string, specs []nsProc) {
	t.Helper()
	for _, sp := range specs {
		dir := filepath.Join("/etc/netns", lab.hosts[sp.name].ns)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			skipMissing(t, "cannot give namespaces their /etc/hosts: "+err.Error())
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644); err != nil {
			t.Fatal(err)
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
	t.Cleanup(func() {
		if t.Failed() {
			for _, sp := range specs {
				b, _ := os.ReadFile(logs[sp.name])
				t.Logf("%s log:\n%s", sp.name, tail(b, 2000))
			}
		}
	})
	for _, sp := range specs {
		env := []string{"SLUICE_DATA_DIR=" + filepath.Join(dataRoot, sp.name)}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "SLUICE_") {
				env = append(env, kv)
			}
		}
		for k, v := range sp.env {
			env = append(env, k+"="+v)
		}
		logs[sp.name] = filepath.Join(dataRoot, sp.name+".log")
		logf, err := os.Create(logs[sp.name])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { logf.Close() })
		prefix := lab.exec(sp.name)
		cmd := exec.Command(prefix[0], append(prefix[1:], binPath, "serve", "--config", sp.file, "--log-format", "json")...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	for _, sp := range specs {
		waitReady(t, sp.admin, 60*time.Second)
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

// TestHelmClusterInNamespaces runs the pods deploy/helm/sluice renders
// (default values: 3 meta, 3 write, 2 read) as the kubelet would start
// them, without Kubernetes: one network namespace per pod with the pod's
// address, the role's ConfigMap as its config file, the container's
// environment resolved for that pod (name, IP, ordinal), and an
// /etc/hosts giving every pod's DNS name (<pod>.<headless service>.
// <namespace>.svc.cluster.local), as the headless services do. Clients
// resolve those names the same way (through their dialer), create a
// topic, produce and consume as in TestComposeClusterInNamespaces, and a
// producer bootstrapped on the read listeners is forwarded by the read
// brokers to the leaders through the names the write brokers advertise.
func TestHelmClusterInNamespaces(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	chart := needHelm(t)
	out, err := helm(t, "template", "sluice", chart, "--namespace", "kafka", "--kube-version", "1.30.0")
	if err != nil {
		t.Fatal(err)
	}
	ms := parseManifests(t, out)
	configMaps := map[string]manifest{}
	var sets []manifest
	for _, m := range ms {
		switch m.kind() {
		case "ConfigMap":
			configMaps[m.name()] = m
		case "StatefulSet":
			sets = append(sets, m)
		}
	}
	// Meta pods first; the order does not matter to Kubernetes (Parallel).
	sort.Slice(sets, func(i, j int) bool { return strings.HasSuffix(sets[i].name(), "-meta") })

	lab := newNetLab(t)
	type pod struct {
		name, fqdn, role string
		index            int
		set              manifest
	}
	var pods []pod
	resolve := map[string]string{} // pod DNS name -> address
	hosts := "127.0.0.1 localhost\n"
	for _, sts := range sets {
		n, _ := dig(sts, "spec", "replicas").(int)
		for i := range n {
			p := pod{name: fmt.Sprintf("%s-%d", sts.name(), i), index: i, set: sts,
				role: str(dig(sts, "spec", "template", "metadata", "labels", "app.kubernetes.io/component"))}
			p.fqdn = p.name + "." + str(dig(sts, "spec", "serviceName")) + ".kafka.svc.cluster.local"
			h := lab.host(t, p.name)
			resolve[p.fqdn] = h.addr
			hosts += h.addr + " " + p.fqdn + " " + p.name + "\n"
			pods = append(pods, p)
		}
	}
	if len(pods) != 8 {
		t.Fatalf("%d pods rendered, want 8", len(pods))
	}
	dir := t.TempDir()
	var specs []nsProc
	kafka := map[string][]string{} // view -> pod listener addresses
	for _, p := range pods {
		spec := dig(p.set, "spec", "template", "spec")
		c := list(dig(spec, "containers"))[0]
		var file string
		for _, v := range list(dig(spec, "volumes")) {
			if cm := configMaps[str(dig(v, "configMap", "name"))]; cm != nil {
				file = filepath.Join(dir, p.name+".yaml")
				if err := os.WriteFile(file, []byte(str(dig(cm, "data", "sluice.yaml"))), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		ports := map[string]int{}
		for _, cp := range list(dig(c, "ports")) {
			ports[str(dig(cp, "name"))] = dig(cp, "containerPort").(int)
		}
		addr := lab.hosts[p.name].addr
		env := kubeletEnv(t, c, map[string]string{
			"metadata.name": p.name, "status.podIP": addr,
			"metadata.labels['apps.kubernetes.io/pod-index']": fmt.Sprint(p.index),
		})
		for k := range env {
			if !strings.HasPrefix(k, "SLUICE_") {
				delete(env, k)
			}
		}
		specs = append(specs, nsProc{name: p.name, file: file, env: env, admin: net.JoinHostPort(addr, fmt.Sprint(ports["admin"]))})
		if p.role != "meta" {
			kafka[p.role] = append(kafka[p.role], net.JoinHostPort(p.fqdn, fmt.Sprint(ports["kafka-"+p.role])))
		}
	}
	runInNamespaces(t, lab, hosts, specs)

	// Clients resolve pod names as the cluster's DNS would.
	var d net.Dialer
	dial := kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		h, port, err := net.SplitHostPort(host)
		if err != nil {
			return nil, err
		}
		a, ok := resolve[h]
		if !ok {
			return nil, fmt.Errorf("%s is not a pod's DNS name", h)
		}
		return d.DialContext(ctx, network, net.JoinHostPort(a, port))
	})
	roundTrip(t, "helm", kafka["write"], kafka["read"], dial)

	// A producer bootstrapped on the read listeners: the read brokers
	// forward its batches to the leaders' write listeners by pod name.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pcl, err := kgo.NewClient(kgo.SeedBrokers(kafka["read"]...), dial, kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: "helm", Value: []byte("through a read broker")}).FirstErr(); err != nil {
		t.Errorf("produce through a read listener: %v", err)
	}
}
