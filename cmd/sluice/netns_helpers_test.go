package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A netLab is a private layer-2 network on this machine: one bridge in
// the root network namespace (the test's clients talk through its
// address) and one network namespace per sluice process, each joined to
// the bridge by a veth pair and given its own address in a /24 picked at
// random per run. Processes bind their real addresses there, so a fault
// can cut one off from the others the way a network does: silently.
//
// Every name starts with netLabPrefix and the test process's pid in base
// 36, so a run removes what a crashed earlier run left behind without
// touching a run that is still going.
type netLab struct {
	ip     string // the iproute2 binary
	run    string // netLabPrefix + pid
	bridge string
	net    string // "10.a.b." : the /24, without the host byte
	hosts  map[string]*netHost
	order  []string
}

// netHost is one namespace on the lab's bridge.
type netHost struct {
	ns, addr, veth string
}

const (
	netLabPrefix = "snx"
	// bogusMAC is no interface's address: a neighbour entry pointing at
	// it makes the kernel send frames nobody accepts, which is a silent
	// drop (no RST, no ICMP), like a cut cable.
	bogusMAC = "02:00:00:00:00:99"
)

// newNetLab creates the bridge. It skips the test when namespaces cannot
// be made here (not root, no ip), and fails instead under CI=true.
func newNetLab(t *testing.T) *netLab {
	t.Helper()
	unavailable := func(why string) {
		t.Helper()
		skipMissing(t, "network namespaces unavailable: "+why)
	}
	if os.Geteuid() != 0 {
		unavailable("not root")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		// sbin directories are often missing from a non-login PATH.
		for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
			if fi, err := os.Stat(dir + "/ip"); err == nil && !fi.IsDir() {
				ip = dir + "/ip"
				break
			}
		}
	}
	if ip == "" {
		unavailable("iproute2's ip is not installed")
	}
	l := &netLab{ip: ip, run: netLabPrefix + strconv.FormatInt(int64(os.Getpid()), 36), hosts: map[string]*netHost{}}
	l.removeLeftovers(t)
	l.bridge = l.run + "-b"
	if out, err := l.cmd("link", "add", l.bridge, "type", "bridge"); err != nil {
		unavailable(fmt.Sprintf("ip link add type bridge: %v: %s", err, out))
	}
	t.Cleanup(func() { l.close(t) })
	l.net = l.pickSubnet(t)
	l.must(t, "addr", "add", l.net+"1/24", "dev", l.bridge)
	l.must(t, "link", "set", l.bridge, "up")
	return l
}

func (l *netLab) cmd(args ...string) (string, error) {
	out, err := exec.Command(l.ip, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (l *netLab) must(t *testing.T, args ...string) {
	t.Helper()
	if out, err := l.cmd(args...); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// pickSubnet picks a 10.x.y.0/24 that no address or route on this
// machine uses yet.
func (l *netLab) pickSubnet(t *testing.T) string {
	t.Helper()
	for range 50 {
		n := fmt.Sprintf("10.%d.%d.", 100+rand.IntN(150), rand.IntN(256))
		addrs, err1 := l.cmd("-4", "-o", "addr", "show")
		routes, err2 := l.cmd("-4", "route", "show", "table", "all")
		if err1 != nil || err2 != nil {
			t.Fatalf("listing addresses and routes: %v %v", err1, err2)
		}
		if !strings.Contains(addrs, " "+n) && !strings.Contains(routes, n) {
			return n
		}
	}
	t.Fatal("no free 10.x.y.0/24 found")
	return ""
}

// host creates the namespace of process name, joined to the bridge.
func (l *netLab) host(t *testing.T, name string) *netHost {
	t.Helper()
	i := len(l.order) + 2 // .1 is the bridge
	h := &netHost{ns: l.run + "-" + name, addr: fmt.Sprintf("%s%d", l.net, i), veth: fmt.Sprintf("%s-v%d", l.run, i)}
	peer := fmt.Sprintf("%s-p%d", l.run, i)
	l.must(t, "netns", "add", h.ns)
	l.hosts[name] = h
	l.order = append(l.order, name)
	l.must(t, "link", "add", h.veth, "type", "veth", "peer", "name", peer)
	l.must(t, "link", "set", peer, "netns", h.ns)
	l.must(t, "link", "set", h.veth, "master", l.bridge, "up")
	l.must(t, "-n", h.ns, "link", "set", peer, "name", "eth0")
	l.must(t, "-n", h.ns, "addr", "add", h.addr+"/24", "dev", "eth0")
	l.must(t, "-n", h.ns, "link", "set", "eth0", "up")
	l.must(t, "-n", h.ns, "link", "set", "lo", "up")
	return h
}

// exec is the command prefix that runs a binary inside name's
// namespace; ip netns exec execs it, so the pid is the binary's.
func (l *netLab) exec(name string) []string {
	return []string{l.ip, "netns", "exec", l.hosts[name].ns}
}

// isolate cuts name off from every other namespace on the lab, both
// ways, with neighbour entries that send to nobody. The root namespace
// (the test's clients) still reaches it: a broker cut off from its peers
// and the metastore but not from its clients is the case where a stale
// leader can take writes it cannot commit.
func (l *netLab) isolate(t *testing.T, name string) {
	t.Helper()
	v := l.hosts[name]
	for _, other := range l.order {
		if other == name {
			continue
		}
		o := l.hosts[other]
		l.must(t, "-n", v.ns, "neigh", "replace", o.addr, "lladdr", bogusMAC, "nud", "permanent", "dev", "eth0")
		l.must(t, "-n", o.ns, "neigh", "replace", v.addr, "lladdr", bogusMAC, "nud", "permanent", "dev", "eth0")
	}
}

// unplug cuts name off from everything, the test's clients included,
// by taking its bridge port down: frames to and from it are dropped.
func (l *netLab) unplug(t *testing.T, name string) {
	t.Helper()
	l.must(t, "link", "set", l.hosts[name].veth, "down")
}

// plug undoes unplug.
func (l *netLab) plug(t *testing.T, name string) {
	t.Helper()
	l.must(t, "link", "set", l.hosts[name].veth, "up")
}

// heal undoes isolate: the kernel resolves the neighbours afresh.
func (l *netLab) heal(t *testing.T, name string) {
	t.Helper()
	v := l.hosts[name]
	for _, other := range l.order {
		if other == name {
			continue
		}
		o := l.hosts[other]
		l.must(t, "-n", v.ns, "neigh", "del", o.addr, "dev", "eth0")
		l.must(t, "-n", o.ns, "neigh", "del", v.addr, "dev", "eth0")
	}
}

// close deletes the veth pairs, the namespaces and the bridge. The
// pairs go first and explicitly: a namespace's own teardown, which would
// take them along, runs asynchronously in the kernel. Processes must be
// gone first: t.Cleanup runs in reverse order, and the cluster registers
// its kill after this.
func (l *netLab) close(t *testing.T) {
	for _, name := range l.order {
		if out, err := l.cmd("link", "del", l.hosts[name].veth); err != nil {
			t.Errorf("ip link del %s: %v: %s", l.hosts[name].veth, err, out)
		}
		if out, err := l.cmd("netns", "del", l.hosts[name].ns); err != nil {
			t.Errorf("ip netns del %s: %v: %s", l.hosts[name].ns, err, out)
		}
	}
	if out, err := l.cmd("link", "del", l.bridge); err != nil {
		t.Errorf("ip link del %s: %v: %s", l.bridge, err, out)
	}
}

// removeLeftovers deletes namespaces and links of earlier runs whose
// test process no longer exists.
func (l *netLab) removeLeftovers(t *testing.T) {
	t.Helper()
	dead := func(name string) bool {
		rest, ok := strings.CutPrefix(name, netLabPrefix)
		if !ok {
			return false
		}
		pid36, _, ok := strings.Cut(rest, "-")
		if !ok {
			return false
		}
		pid, err := strconv.ParseInt(pid36, 36, 32)
		if err != nil || pid <= 0 {
			return false
		}
		// ESRCH: no such process. EPERM would mean it exists.
		return syscall.Kill(int(pid), 0) == syscall.ESRCH
	}
	if out, err := l.cmd("netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && dead(f[0]) {
				if o, err := l.cmd("netns", "del", f[0]); err != nil {
					t.Logf("removing leftover namespace %s: %v: %s", f[0], err, o)
				} else {
					t.Logf("removed leftover namespace %s", f[0])
				}
			}
		}
	}
	if out, err := l.cmd("-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			// "12: name@if11: <...> ..."
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if dead(name) {
				if o, err := l.cmd("link", "del", name); err != nil {
					t.Logf("removing leftover link %s: %v: %s", name, err, o)
				} else {
					t.Logf("removed leftover link %s", name)
				}
			}
		}
	}
}

// cutFrom cuts name off from the namespaces others only, both ways,
// as isolate does from all of them; every other path stays.
func (l *netLab) cutFrom(t *testing.T, name string, others ...string) {
	t.Helper()
	v := l.hosts[name]
	for _, other := range others {
		o := l.hosts[other]
		l.must(t, "-n", v.ns, "neigh", "replace", o.addr, "lladdr", bogusMAC, "nud", "permanent", "dev", "eth0")
		l.must(t, "-n", o.ns, "neigh", "replace", v.addr, "lladdr", bogusMAC, "nud", "permanent", "dev", "eth0")
	}
}

// healFrom undoes cutFrom.
func (l *netLab) healFrom(t *testing.T, name string, others ...string) {
	t.Helper()
	v := l.hosts[name]
	for _, other := range others {
		o := l.hosts[other]
		l.must(t, "-n", v.ns, "neigh", "del", o.addr, "dev", "eth0")
		l.must(t, "-n", o.ns, "neigh", "del", v.addr, "dev", "eth0")
	}
}

// addAddr gives name's namespace a second address on the lab's /24 and
// returns it: a socket bound to it can be cut off (by address) while the
// host's first address stays reachable.
func (l *netLab) addAddr(t *testing.T, name string) string {
	t.Helper()
	h := l.hosts[name]
	i := slices.Index(l.order, name) + 2
	a := fmt.Sprintf("%s%d", l.net, 100+i)
	l.must(t, "-n", h.ns, "addr", "add", a+"/24", "dev", "eth0")
	return a
}

// cutAddrs makes every namespace send what it addresses to any of addrs
// to nobody: those addresses are unreachable from the lab, both ways for
// a TCP connection.
func (l *netLab) cutAddrs(t *testing.T, addrs ...string) {
	t.Helper()
	for _, name := range l.order {
		for _, a := range addrs {
			l.must(t, "-n", l.hosts[name].ns, "neigh", "replace", a, "lladdr", bogusMAC, "nud", "permanent", "dev", "eth0")
		}
	}
}

// healAddrs undoes cutAddrs.
func (l *netLab) healAddrs(t *testing.T, addrs ...string) {
	t.Helper()
	for _, name := range l.order {
		for _, a := range addrs {
			// A namespace never resolved the address of its own.
			l.cmd("-n", l.hosts[name].ns, "neigh", "del", a, "dev", "eth0")
		}
	}
}
