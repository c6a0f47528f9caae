package acl

import (
	"sync"
	"sync/atomic"
)

// Config is the authorizer's static configuration (Kafka's broker settings
// of the same names).
type Config struct {
	// SuperUsers (super.users, "User:a;User:b") may do anything,
	// whatever the ACLs say.
	SuperUsers []string
	// AllowIfNoACL (allow.everyone.if.no.acl.found) allows an operation
	// on a resource that no ACL at all applies to. Default false.
	AllowIfNoACL bool
}

// Source holds the bindings: the metastore client's cache on a broker.
// ACLGeneration changes whenever the bindings do and must be cheap (it is
// read on every decision); ACLs returns the bindings with their
// generation.
type Source interface {
	ACLGeneration() uint64
	ACLs() (gen uint64, bindings []Binding)
}

// SuperUserSource is a Source that also stores super users (the
// metastore: the bootstrap user). The authorizer combines them with
// Config.SuperUsers; a change of the stored set must move ACLGeneration.
type SuperUserSource interface {
	Source
	StoredSuperUsers() []string
}

// Authorizer decides requests against the bindings of its Source. Safe for
// concurrent use. A decision reads an immutable index, rebuilt on the first
// decision after the source's generation moved, so a change committed to
// the metastore applies as soon as the broker's cache has it.
type Authorizer struct {
	cfg Config
	src Source

	mu  sync.Mutex // serialises rebuilds
	cur atomic.Pointer[index]
}

// New returns an authorizer over src.
func New(cfg Config, src Source) *Authorizer {
	return &Authorizer{cfg: cfg, src: src}
}

// Request is who asks: the principal ("User:name") and the client's IP
// address as text.
type Request struct {
	Principal string
	Host      string
}

// index holds the bindings by resource type: literal ones by name (the
// wildcard "*" among them), prefixed ones by prefix.
type index struct {
	gen       uint64
	literal   map[ResourceType]map[string][]Binding
	prefixed  map[ResourceType]map[string][]Binding
	maxPrefix map[ResourceType]int // the longest prefix of each type bounds the lookups
	all       []Binding
	// super are the super users: Config.SuperUsers and the source's
	// stored ones (SuperUserSource).
	super map[string]bool
}

func buildIndex(gen uint64, bs []Binding, super ...[]string) *index {
	ix := &index{gen: gen, literal: map[ResourceType]map[string][]Binding{},
		prefixed: map[ResourceType]map[string][]Binding{}, maxPrefix: map[ResourceType]int{}, all: bs,
		super: map[string]bool{}}
	for _, us := range super {
		for _, u := range us {
			ix.super[u] = true
		}
	}
	for _, b := range bs {
		m := ix.literal
		switch b.PatternType {
		case PatternPrefixed:
			m = ix.prefixed
			ix.maxPrefix[b.ResourceType] = max(ix.maxPrefix[b.ResourceType], len(b.ResourceName))
		case PatternLiteral:
		default:
			continue
		}
		if m[b.ResourceType] == nil {
			m[b.ResourceType] = map[string][]Binding{}
		}
		m[b.ResourceType][b.ResourceName] = append(m[b.ResourceType][b.ResourceName], b)
	}
	return ix
}

func (a *Authorizer) index() *index {
	if ix := a.cur.Load(); ix != nil && ix.gen == a.src.ACLGeneration() {
		return ix
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	gen, bs := a.src.ACLs()
	if ix := a.cur.Load(); ix != nil && ix.gen == gen {
		return ix
	}
	var stored []string
	if ss, ok := a.src.(SuperUserSource); ok {
		// Read after the bindings: a generation moved in between
		// only makes the next decision rebuild again.
		stored = ss.StoredSuperUsers()
	}
	ix := buildIndex(gen, bs, a.cfg.SuperUsers, stored)
	a.cur.Store(ix)
	return ix
}

// forEach calls fn with every binding that applies to the resource: literal
// ones of its name, the literal wildcard, and prefixed ones whose prefix
// begins name; fn returns false to stop.
func (ix *index) forEach(rt ResourceType, name string, fn func(Binding) bool) {
	if lit := ix.literal[rt]; lit != nil {
		for _, b := range lit[name] {
			if !fn(b) {
				return
			}
		}
		if name != WildcardResource {
			for _, b := range lit[WildcardResource] {
				if !fn(b) {
					return
				}
			}
		}
	}
	if pre := ix.prefixed[rt]; pre != nil {
		for n := min(len(name), ix.maxPrefix[rt]); n > 0; n-- {
			for _, b := range pre[name[:n]] {
				if !fn(b) {
					return
				}
			}
		}
	}
}

// impliesDescribe and impliesDescribeConfigs are the operations whose
// ALLOW also allows DESCRIBE, and DESCRIBE_CONFIGS (Kafka's
// StandardAuthorizerData IMPLIES_DESCRIBE, IMPLIES_DESCRIBE_CONFIGS).
func implies(aclOp, op Operation) bool {
	if aclOp == OpAll || aclOp == op {
		return true
	}
	switch op {
	case OpDescribe:
		return aclOp == OpRead || aclOp == OpWrite || aclOp == OpDelete || aclOp == OpAlter
	case OpDescribeConfigs:
		return aclOp == OpAlterConfigs
	}
	return false
}

// applies reports whether binding b speaks about r at all (principal and
// host), before its operation is considered.
func applies(b Binding, r Request) bool {
	if b.Principal != r.Principal && b.Principal != WildcardPrincipal {
		return false
	}
	return b.Host == WildcardHost || b.Host == r.Host
}

// Authorize decides whether r may perform op on the resource (rt, name),
// with Kafka's rules: a super user (super.users, or stored in the source)
// may; else a matching DENY (its
// operation op itself or ALL) refuses, whatever allows; else a matching
// ALLOW (op, ALL, or an operation implying op: READ, WRITE, DELETE and
// ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
// else, when no ACL at all applies to the resource, the answer is
// allow.everyone.if.no.acl.found; else refused.
func (a *Authorizer) Authorize(r Request, op Operation, rt ResourceType, name string) bool {
	ix := a.index()
	if ix.super[r.Principal] {
		return true
	}
	found, allowed, denied := false, false, false
	ix.forEach(rt, name, func(b Binding) bool {
		found = true
		if !applies(b, r) {
			return true
		}
		switch b.Permission {
		case Deny:
			if b.Operation == OpAll || b.Operation == op {
				denied = true
				return false
			}
		case Allow:
			if implies(b.Operation, op) {
				allowed = true
			}
		}
		return true
	})
	switch {
	case denied:
		return false
	case allowed:
		return true
	}
	return !found && a.cfg.AllowIfNoACL
}

// AuthorizeAny reports whether r may perform op on at least one resource
// of type rt that could exist (Kafka's Authorizer.authorizeByResourceType,
// KIP-679: InitProducerId without a transactional id asks whether the
// producer may WRITE to some topic). Allowed for a super user, or when op
// is allowed on an arbitrary name without ACLs of its own; else when an
// ALLOW of r for op (or ALL) exists on the wildcard, or on a literal name
// or prefix that no DENY covers (a literal DENY of the same name, a
// prefixed DENY of a prefix of it, or a DENY on the wildcard).
func (a *Authorizer) AuthorizeAny(r Request, op Operation, rt ResourceType) bool {
	if a.Authorize(r, op, rt, "hardcode") {
		return true
	}
	denyLiteral, denyPrefix := map[string]bool{}, map[string]bool{}
	var allowLiteral, allowPrefix []string
	wildcardAllow := false
	for _, b := range a.index().all {
		if b.ResourceType != rt || !applies(b, r) || (b.Operation != op && b.Operation != OpAll) {
			continue
		}
		switch {
		case b.Permission == Deny && b.PatternType == PatternLiteral:
			if b.ResourceName == WildcardResource {
				return false
			}
			denyLiteral[b.ResourceName] = true
		case b.Permission == Deny && b.PatternType == PatternPrefixed:
			denyPrefix[b.ResourceName] = true
		case b.Permission == Allow && b.PatternType == PatternLiteral:
			if b.ResourceName == WildcardResource {
				wildcardAllow = true
			} else {
				allowLiteral = append(allowLiteral, b.ResourceName)
			}
		case b.Permission == Allow && b.PatternType == PatternPrefixed:
			allowPrefix = append(allowPrefix, b.ResourceName)
		}
	}
	if wildcardAllow {
		return true
	}
	dominated := func(name string) bool {
		for n := 1; n <= len(name); n++ {
			if denyPrefix[name[:n]] {
				return true
			}
		}
		return false
	}
	for _, n := range allowLiteral {
		if !denyLiteral[n] && !dominated(n) {
			return true
		}
	}
	for _, n := range allowPrefix {
		if !dominated(n) {
			return true
		}
	}
	return false
}

// Operations Kafka reports as authorized operations, per resource type
// (the resource type's supported operations, Kafka's
// AclEntry.supportedOperations, which AuthHelper walks).
var (
	TopicOps   = []Operation{OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs}
	GroupOps   = []Operation{OpRead, OpDelete, OpDescribe, OpDescribeConfigs, OpAlterConfigs}
	ClusterOps = []Operation{OpCreate, OpAlter, OpDescribe, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite}
)

// OpsBits is Kafka's bit field of operations (bit n set for the operation
// of code n): the authorized-operations fields of Metadata, DescribeGroups,
// DescribeCluster and ConsumerGroupDescribe.
func OpsBits(ops []Operation) int32 {
	var bits int32
	for _, op := range ops {
		bits |= 1 << uint(op)
	}
	return bits
}

// AuthorizedOps returns the bit field of the operations among ops that r
// may perform on the resource.
func (a *Authorizer) AuthorizedOps(r Request, rt ResourceType, name string, ops []Operation) int32 {
	var bits int32
	for _, op := range ops {
		if a.Authorize(r, op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// Match returns the bindings f selects, in the source's order.
func (a *Authorizer) Match(f Filter) []Binding {
	var out []Binding
	for _, b := range a.index().all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}
