package configs

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// Security protocols as Kafka names them (the others are in security.go).
const ProtocolPlaintext = "PLAINTEXT"

var securityProtocols = map[string]bool{"PLAINTEXT": true, "SSL": true, "SASL_PLAINTEXT": true, "SASL_SSL": true}

// ParseListeners reads listeners as Kafka writes them in server.properties:
// "NAME://host:port,NAME://host:port". An empty host ("PLAINTEXT://:9092")
// binds every interface, as in Kafka. Names are upper-cased, as Kafka's
// ListenerName does. Views and advertised addresses come from their own
// keys (listener.views, advertised.listeners): see Config.ResolveListeners.
func ParseListeners(spec string) ([]Listener, error) {
	var out []Listener
	seen := map[string]bool{}
	for _, item := range splitList(spec) {
		name, addr, err := parseListenerURI(item)
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("listener %s is named twice", name)
		}
		seen[name] = true
		out = append(out, Listener{Name: name, Address: addr})
	}
	return out, nil
}

// parseListenerURI splits "NAME://host:port" into the upper-cased name
// and host:port.
func parseListenerURI(item string) (name, addr string, err error) {
	name, addr, ok := strings.Cut(item, "://")
	if !ok || name == "" {
		return "", "", fmt.Errorf("listener %q: want NAME://host:port", item)
	}
	for _, r := range name {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return "", "", fmt.Errorf("listener %q: name %q may hold letters, digits, '_' and '-' only", item, name)
		}
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", "", fmt.Errorf("listener %q: %v", item, err)
	}
	return strings.ToUpper(name), addr, nil
}

// parseNameMap reads Kafka's "NAME:VALUE,NAME:VALUE" maps
// (listener.security.protocol.map, listener.views); names are
// upper-cased, values kept as written.
func parseNameMap(key, spec string) (map[string]string, error) {
	m := map[string]string{}
	for _, item := range splitList(spec) {
		name, val, ok := strings.Cut(item, ":")
		if !ok || name == "" || val == "" {
			return nil, fmt.Errorf("%s: %q is not NAME:VALUE", key, item)
		}
		m[strings.ToUpper(strings.TrimSpace(name))] = strings.TrimSpace(val)
	}
	return m, nil
}

func splitList(spec string) []string {
	var out []string
	for _, s := range strings.Split(spec, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ResolveListeners applies the keys that Kafka keeps beside `listeners`
// to c.Listeners, once, after loading:
//   - advertised.listeners ("NAME://host:port,..."): the address clients
//     are given for the listener of that name (each name must be a
//     listener);
//   - listener.views ("NAME:view,..."): write, read or mixed, for a
//     listener whose view is not set in the YAML list form; mixed when
//     neither says;
//   - listener.security.protocol.map ("NAME:PROTOCOL,..."; Kafka's
//     default maps each protocol name to itself): a listener named in it
//     gets that protocol; a listener given as NAME://host:port must be
//     named there (or be a protocol name), as Kafka requires; one from the
//     YAML list form that is not is PLAINTEXT. SSL and SASL_* listeners
//     take their settings from the ssl.* and sasl.* keys (security.go);
//   - log.dirs: Kafka's name for the data directory; it takes the place
//     of data.dir when set (one directory only).
//
// It also refuses a listener that binds every interface (0.0.0.0, ::, an
// empty host) without an advertised address: clients would be told to
// connect to 0.0.0.0.
func (c *Config) ResolveListeners(kafkaForm bool) error {
	var errs []error
	if c.LogDirs != "" {
		dirs := splitList(c.LogDirs)
		if len(dirs) != 1 {
			errs = append(errs, fmt.Errorf("log.dirs %q: one directory only (Sluice keeps a broker's data in one directory)", c.LogDirs))
		} else {
			c.DataDir = dirs[0]
		}
	}
	protoMap, err := parseNameMap("listener.security.protocol.map", c.ListenerSecurityProtocolMap)
	if err != nil {
		errs = append(errs, err)
	}
	views, err := parseNameMap("listener.views", c.ListenerViews)
	if err != nil {
		errs = append(errs, err)
	}
	byName := map[string]*Listener{}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		byName[strings.ToUpper(l.Name)] = l
	}
	for name := range views {
		if byName[name] == nil {
			errs = append(errs, fmt.Errorf("listener.views names %s, which is not a listener", name))
		}
	}
	if c.AdvertisedListeners != "" {
		for _, item := range splitList(c.AdvertisedListeners) {
			name, addr, err := parseListenerURI(item)
			if err != nil {
				errs = append(errs, fmt.Errorf("advertised.listeners: %w", err))
				continue
			}
			l := byName[name]
			if l == nil {
				errs = append(errs, fmt.Errorf("advertised.listeners names %s, which is not a listener", name))
				continue
			}
			l.Advertised = addr
		}
	}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		name := strings.ToUpper(l.Name)
		if l.View == "" {
			l.View = views[name]
		}
		if l.View == "" {
			l.View = "mixed"
		}
		proto, mapped := protoMap[name]
		switch {
		case mapped:
		case securityProtocols[name]:
			proto = name
		case kafkaForm:
			errs = append(errs, fmt.Errorf("listener %s is not in listener.security.protocol.map (add %s:PLAINTEXT)", name, name))
			continue
		default:
			proto = ProtocolPlaintext
		}
		proto = strings.ToUpper(proto)
		if !securityProtocols[proto] {
			errs = append(errs, fmt.Errorf("listener %s: unknown security protocol %q", name, proto))
		}
		l.Protocol = proto
		if host, _, err := net.SplitHostPort(l.Address); err == nil && unspecifiedHost(host) && l.Advertised == "" {
			errs = append(errs, fmt.Errorf("listener %s binds every interface (%s) and has no advertised address: clients would be told to connect to %s; set advertised.listeners (e.g. %s://broker-1.example.com:%s)",
				name, l.Address, l.Address, name, portOf(l.Address)))
		}
		if host, _, err := net.SplitHostPort(l.Advertised); err == nil && unspecifiedHost(host) {
			errs = append(errs, fmt.Errorf("listener %s: advertised address %s is not one a client can connect to", name, l.Advertised))
		}
	}
	return errors.Join(errs...)
}

func unspecifiedHost(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
