package quota

import "github.com/sluice-broker/sluice/metastore"

// Quota kinds: Kafka's quota config names.
const (
	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
)

// Kinds lists the quota kinds a user or client id entity may set, with
// whether the value must be a whole number (Kafka's LONG configs).
var Kinds = map[string]bool{
	ProducerByteRate:       true,
	ConsumerByteRate:       true,
	RequestPercentage:      false,
	ControllerMutationRate: false,
}

// ConnectionCreationRate is the quota of an ip entity: new connections
// per second from one address.
const ConnectionCreationRate = "connection_creation_rate"

// IPKinds lists the quota kinds an ip entity may set, as Kinds.
var IPKinds = map[string]bool{ConnectionCreationRate: true}

// Key identifies the sensor a client's usage is recorded in: the user
// and client id parts of the entity whose quota applies (empty when the
// entity has no such part), as Kafka's quota metric tags.
type Key struct {
	User, ClientID string
	// IP is set, alone, for connection_creation_rate.
	IP string
}

// Limits is a set of configured quotas, indexed for lookups. It is
// immutable; build a new one when the quotas change.
type Limits struct {
	byKind map[string]map[metastore.QuotaEntity]float64
}

// NewLimits indexes qs.
func NewLimits(qs []metastore.ClientQuota) *Limits {
	l := &Limits{byKind: map[string]map[metastore.QuotaEntity]float64{}}
	for _, q := range qs {
		for k, v := range q.Values {
			m := l.byKind[k]
			if m == nil {
				m = map[metastore.QuotaEntity]float64{}
				l.byKind[k] = m
			}
			m[q.Entity] = v
		}
	}
	return l
}

// Any reports whether a quota of kind is set for any entity.
func (l *Limits) Any(kind string) bool { return l != nil && len(l.byKind[kind]) > 0 }

// Resolve returns the bound of kind that applies to a client of user and
// clientID, and the key of the sensor it shares; ok is false when no
// quota of kind applies (unlimited).
func (l *Limits) Resolve(kind, user, clientID string) (bound float64, key Key, ok bool) {
	m := l.byKind[kind]
	if len(m) == 0 {
		return 0, Key{}, false
	}
	name := func(n string) metastore.QuotaName { return metastore.QuotaName{Set: true, Name: n} }
	def := metastore.QuotaName{Set: true, Default: true}
	none := metastore.QuotaName{}
	u, c := name(user), name(clientID)
	for _, e := range [...]struct {
		ent  metastore.QuotaEntity
		user bool // the sensor is per user
		cli  bool // the sensor is per client id
	}{
		{metastore.QuotaEntity{User: u, ClientID: c}, true, true},
		{metastore.QuotaEntity{User: u, ClientID: def}, true, true},
		{metastore.QuotaEntity{User: u, ClientID: none}, true, false},
		{metastore.QuotaEntity{User: def, ClientID: c}, true, true},
		{metastore.QuotaEntity{User: def, ClientID: def}, true, true},
		{metastore.QuotaEntity{User: def, ClientID: none}, true, false},
		{metastore.QuotaEntity{User: none, ClientID: c}, false, true},
		{metastore.QuotaEntity{User: none, ClientID: def}, false, true},
	} {
		if v, found := m[e.ent]; found {
			if e.user {
				key.User = user
			}
			if e.cli {
				key.ClientID = clientID
			}
			return v, key, true
		}
	}
	return 0, Key{}, false
}

// ResolveIP returns the connection_creation_rate bound for connections
// from ip: its own entity's, else the <default> ip entity's.
func (l *Limits) ResolveIP(ip string) (float64, Key, bool) {
	m := l.byKind[ConnectionCreationRate]
	if len(m) == 0 {
		return 0, Key{}, false
	}
	if v, ok := m[metastore.QuotaEntity{IP: metastore.QuotaName{Set: true, Name: ip}}]; ok {
		return v, Key{IP: ip}, true
	}
	if v, ok := m[metastore.QuotaEntity{IP: metastore.QuotaName{Set: true, Default: true}}]; ok {
		return v, Key{IP: ip}, true
	}
	return 0, Key{}, false
}
