package server

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/sluice-broker/sluice/configs"
)

// connLimits applies Kafka's connection quotas (its ConnectionQuotas) to
// the Kafka listeners: max.connections over all listeners, which makes
// the accept loops wait; max.connection.creation.rate, which paces them;
// and max.connections.per.ip with its overrides, which closes a
// connection past the bound at once. A limit at math.MaxInt32 (Kafka's
// default) is off.
type connLimits struct {
	maxTotal  int // -1: off
	maxPerIP  int
	overrides map[netip.Addr]int
	rate      float64 // connections per second; 0: off

	mu     sync.Mutex
	total  int
	perIP  map[netip.Addr]int
	room   chan struct{} // closed and replaced when a connection ends; nil until someone waits
	tokens float64       // creation rate bucket
	filled time.Time
}

func newConnLimits(cfg configs.Config) (*connLimits, error) {
	l := &connLimits{maxTotal: -1, perIP: map[netip.Addr]int{}, overrides: map[netip.Addr]int{}}
	if cfg.MaxConnections < math.MaxInt32 {
		l.maxTotal = int(cfg.MaxConnections)
	}
	l.maxPerIP = int(cfg.MaxConnectionsPerIP)
	if cfg.MaxConnectionCreationRate < math.MaxInt32 {
		l.rate = float64(cfg.MaxConnectionCreationRate)
	}
	hosts, err := configs.ParseConnectionOverrides(cfg.MaxConnectionsPerIPOverrides)
	if err != nil {
		return nil, err
	}
	for host, n := range hosts {
		// Kafka resolves each host once (InetAddress.getByName); a
		// name here stands for every address it has now.
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(host); err == nil {
			addrs = append(addrs, a.Unmap())
		} else {
			ips, err := net.LookupIP(host)
			if err != nil {
				return nil, fmt.Errorf("max.connections.per.ip.overrides: %s: %w", host, err)
			}
			for _, ip := range ips {
				if a, ok := netip.AddrFromSlice(ip); ok {
					addrs = append(addrs, a.Unmap())
				}
			}
		}
		for _, a := range addrs {
			l.overrides[a] = int(n)
		}
	}
	return l, nil
}

// waitRoom blocks an accept loop until max.connections leaves room for
// one more connection and the creation rate allows one more, so that
// clients past the limits wait in the kernel's backlog, holding no file
// descriptor of the broker. It returns how long it waited.
func (l *connLimits) waitRoom(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	for {
		l.mu.Lock()
		if room := l.fullLocked(); room != nil {
			l.mu.Unlock()
			select {
			case <-room:
				continue
			case <-ctx.Done():
				return time.Since(start), ctx.Err()
			}
		}
		wait := l.takeTokenLocked(time.Now())
		l.mu.Unlock()
		if wait == 0 {
			return time.Since(start), nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return time.Since(start), ctx.Err()
		}
	}
}

// fullLocked returns a channel closed when a connection ends if
// max.connections are open, or nil.
func (l *connLimits) fullLocked() chan struct{} {
	if l.maxTotal < 0 || l.total < l.maxTotal {
		return nil
	}
	if l.room == nil {
		l.room = make(chan struct{})
	}
	return l.room
}

// takeTokenLocked takes one token of the creation-rate bucket (which
// holds up to one second of connections, so a burst of rate connections
// passes at once, about what Kafka's windowed rate allows), or says how
// long until one is there.
func (l *connLimits) takeTokenLocked(now time.Time) time.Duration {
	if l.rate <= 0 {
		return 0
	}
	burst := max(l.rate, 1)
	if l.filled.IsZero() {
		l.tokens = burst
	} else {
		l.tokens = min(burst, l.tokens+now.Sub(l.filled).Seconds()*l.rate)
	}
	l.filled = now
	if l.tokens >= 1 {
		l.tokens--
		return 0
	}
	return time.Duration((1 - l.tokens) / l.rate * float64(time.Second))
}

// admit counts an accepted connection: it waits while max.connections
// are open (another listener may have taken the room waitRoom saw, as
// Kafka's acceptor waits holding the new socket), then applies the
// connection's address's bound. On false (or an error: closing) the
// connection must be closed; it is not counted.
func (l *connLimits) admit(ctx context.Context, ip netip.Addr) (ok bool, limit int, err error) {
	l.mu.Lock()
	for {
		room := l.fullLocked()
		if room == nil {
			break
		}
		l.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return false, 0, ctx.Err()
		}
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	limit, found := l.overrides[ip]
	if !found {
		limit = l.maxPerIP
	}
	if l.perIP[ip] >= limit {
		return false, limit, nil
	}
	l.perIP[ip]++
	l.total++
	return true, limit, nil
}

// release ends an admitted connection.
func (l *connLimits) release(ip netip.Addr) {
	l.mu.Lock()
	if n := l.perIP[ip]; n <= 1 {
		delete(l.perIP, ip)
	} else {
		l.perIP[ip] = n - 1
	}
	l.total--
	l.wakeLocked()
	l.mu.Unlock()
}

func (l *connLimits) wakeLocked() {
	if l.room != nil {
		close(l.room)
		l.room = nil
	}
}

// remoteIP is the address a connection's per-IP count is kept under.
func remoteIP(nc net.Conn) netip.Addr {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}
