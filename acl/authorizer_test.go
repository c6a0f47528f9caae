package acl

import (
	"strconv"
	"sync/atomic"
	"testing"
)

// staticSource is a Source over a fixed list whose generation a test bumps.
type staticSource struct {
	gen atomic.Uint64
	bs  []Binding
}

func (s *staticSource) ACLGeneration() uint64 { return s.gen.Load() }
func (s *staticSource) ACLs() (uint64, []Binding) {
	return s.gen.Load(), s.bs
}

func allow(rt ResourceType, pt PatternType, name, principal, host string, op Operation) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: Allow}
}

func deny(rt ResourceType, pt PatternType, name, principal, host string, op Operation) Binding {
	b := allow(rt, pt, name, principal, host, op)
	b.Permission = Deny
	return b
}

const (
	alice = "User:alice"
	bob   = "User:bob"
	ip1   = "10.0.0.1"
	ip2   = "10.0.0.2"
)

func TestAuthorize(t *testing.T) {
	tests := []struct {
		name      string
		acls      []Binding
		cfg       Config
		principal string
		host      string
		op        Operation
		rt        ResourceType
		res       string
		want      bool
	}{
		{name: "no ACL, default refuses", principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: false},
		{name: "no ACL, allow.everyone.if.no.acl.found", cfg: Config{AllowIfNoACL: true}, principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: true},
		{name: "an ACL for someone else makes the resource protected", cfg: Config{AllowIfNoACL: true},
			acls:      []Binding{allow(ResourceTopic, PatternLiteral, "t", bob, "*", OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: false},
		{name: "ACL on another topic leaves this one open", cfg: Config{AllowIfNoACL: true},
			acls:      []Binding{allow(ResourceTopic, PatternLiteral, "other", bob, "*", OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: true},
		{name: "literal allow", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: true},
		{name: "literal allow is for its name only", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t2", want: false},
		{name: "other resource type does not count", acls: []Binding{allow(ResourceGroup, PatternLiteral, "t", alice, "*", OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: false},
		{name: "allow READ does not allow WRITE", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead)},
			principal: alice, host: ip1, op: OpWrite, rt: ResourceTopic, res: "t", want: false},
		{name: "ALL allows WRITE", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpAll)},
			principal: alice, host: ip1, op: OpWrite, rt: ResourceTopic, res: "t", want: true},
		{name: "READ implies DESCRIBE", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead)},
			principal: alice, host: ip1, op: OpDescribe, rt: ResourceTopic, res: "t", want: true},
		{name: "WRITE implies DESCRIBE", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpWrite)},
			principal: alice, host: ip1, op: OpDescribe, rt: ResourceTopic, res: "t", want: true},
		{name: "DELETE implies DESCRIBE", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpDelete)},
			principal: alice, host: ip1, op: OpDescribe, rt: ResourceTopic, res: "t", want: true},
		{name: "ALTER implies DESCRIBE", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpAlter)},
			principal: alice, host: ip1, op: OpDescribe, rt: ResourceTopic, res: "t", want: true},
		{name: "CREATE does not imply DESCRIBE", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpCreate)},
			principal: alice, host: ip1, op: OpDescribe, rt: ResourceTopic, res: "t", want: false},
		{name: "DESCRIBE implies nothing", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpDescribe)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: false},
		{name: "ALTER_CONFIGS implies DESCRIBE_CONFIGS", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpAlterConfigs)},
			principal: alice, host: ip1, op: OpDescribeConfigs, rt: ResourceTopic, res: "t", want: true},
		{name: "ALTER_CONFIGS does not imply DESCRIBE", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpAlterConfigs)},
			principal: alice, host: ip1, op: OpDescribe, rt: ResourceTopic, res: "t", want: false},
		{name: "DENY wins over ALLOW", acls: []Binding{
			allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead),
			deny(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: false},
		{name: "DENY ALL wins over ALLOW READ", acls: []Binding{
			allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead),
			deny(ResourceTopic, PatternLiteral, "t", alice, "*", OpAll)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: false},
		{name: "DENY READ does not deny DESCRIBE implied by WRITE", acls: []Binding{
			allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpWrite),
			deny(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead)},
			principal: alice, host: ip1, op: OpDescribe, rt: ResourceTopic, res: "t", want: true},
		{name: "wildcard-resource DENY wins over literal ALLOW", acls: []Binding{
			allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead),
			deny(ResourceTopic, PatternLiteral, "*", alice, "*", OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: false},
		{name: "prefixed DENY wins over literal ALLOW", acls: []Binding{
			allow(ResourceTopic, PatternLiteral, "orders-eu", alice, "*", OpRead),
			deny(ResourceTopic, PatternPrefixed, "orders-", alice, "*", OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "orders-eu", want: false},
		{name: "DENY for another principal does not apply", acls: []Binding{
			allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead),
			deny(ResourceTopic, PatternLiteral, "t", bob, "*", OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: true},
		{name: "DENY for another host does not apply", acls: []Binding{
			allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead),
			deny(ResourceTopic, PatternLiteral, "t", alice, ip2, OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: true},
		{name: "DENY from that host applies", acls: []Binding{
			allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead),
			deny(ResourceTopic, PatternLiteral, "t", alice, ip2, OpRead)},
			principal: alice, host: ip2, op: OpRead, rt: ResourceTopic, res: "t", want: false},
		{name: "ALLOW from another host only", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, ip2, OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: false},
		{name: "wildcard principal User:*", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", "User:*", "*", OpRead)},
			principal: "User:ANONYMOUS", host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: true},
		{name: "principal type matters", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", "Group:alice", "*", OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: false},
		{name: "wildcard resource", acls: []Binding{allow(ResourceTopic, PatternLiteral, "*", alice, "*", OpRead)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "anything", want: true},
		{name: "prefixed allow", acls: []Binding{allow(ResourceTopic, PatternPrefixed, "orders-", alice, "*", OpWrite)},
			principal: alice, host: ip1, op: OpWrite, rt: ResourceTopic, res: "orders-us", want: true},
		{name: "prefixed allow covers the prefix itself", acls: []Binding{allow(ResourceTopic, PatternPrefixed, "orders-", alice, "*", OpWrite)},
			principal: alice, host: ip1, op: OpWrite, rt: ResourceTopic, res: "orders-", want: true},
		{name: "prefixed allow does not cover shorter names", acls: []Binding{allow(ResourceTopic, PatternPrefixed, "orders-", alice, "*", OpWrite)},
			principal: alice, host: ip1, op: OpWrite, rt: ResourceTopic, res: "orders", want: false},
		{name: "prefixed '*' is a literal prefix, not a wildcard", acls: []Binding{allow(ResourceTopic, PatternPrefixed, "*", alice, "*", OpWrite)},
			principal: alice, host: ip1, op: OpWrite, rt: ResourceTopic, res: "orders", want: false},
		{name: "super user ignores DENY", cfg: Config{SuperUsers: []string{alice}},
			acls:      []Binding{deny(ResourceTopic, PatternLiteral, "t", alice, "*", OpAll)},
			principal: alice, host: ip1, op: OpRead, rt: ResourceTopic, res: "t", want: true},
		{name: "cluster ACL", acls: []Binding{allow(ResourceCluster, PatternLiteral, ClusterName, alice, "*", OpIdempotentWrite)},
			principal: alice, host: ip1, op: OpIdempotentWrite, rt: ResourceCluster, res: ClusterName, want: true},
		{name: "transactional id ACL", acls: []Binding{allow(ResourceTransactionalID, PatternPrefixed, "app-", alice, "*", OpWrite)},
			principal: alice, host: ip1, op: OpWrite, rt: ResourceTransactionalID, res: "app-1", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(tt.cfg, &staticSource{bs: tt.acls})
			got := a.Authorize(Request{Principal: tt.principal, Host: tt.host}, tt.op, tt.rt, tt.res)
			if got != tt.want {
				t.Fatalf("Authorize(%s, %s %s:%s) = %v, want %v", tt.principal, tt.op, tt.rt, tt.res, got, tt.want)
			}
		})
	}
}

func TestAuthorizeFollowsSourceGeneration(t *testing.T) {
	src := &staticSource{}
	a := New(Config{}, src)
	r := Request{Principal: alice, Host: ip1}
	if a.Authorize(r, OpWrite, ResourceTopic, "t") {
		t.Fatal("allowed with no ACL")
	}
	src.bs = []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpWrite)}
	if a.Authorize(r, OpWrite, ResourceTopic, "t") {
		t.Fatal("a new list under the same generation was used: the index must be rebuilt only when the generation moves")
	}
	src.gen.Add(1)
	if !a.Authorize(r, OpWrite, ResourceTopic, "t") {
		t.Fatal("the ALLOW of the new generation was not applied")
	}
}

func TestAuthorizeAny(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		acls []Binding
		want bool
	}{
		{name: "nothing", want: false},
		{name: "no ACL, allow.everyone", cfg: Config{AllowIfNoACL: true}, want: true},
		{name: "literal allow", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpWrite)}, want: true},
		{name: "ALL allow", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpAll)}, want: true},
		{name: "READ is not WRITE", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead)}, want: false},
		{name: "literal allow, literal deny", acls: []Binding{
			allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpWrite),
			deny(ResourceTopic, PatternLiteral, "t", alice, "*", OpWrite)}, want: false},
		{name: "literal allow, deny on another", acls: []Binding{
			allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpWrite),
			deny(ResourceTopic, PatternLiteral, "u", alice, "*", OpWrite)}, want: true},
		{name: "prefixed allow dominated by shorter prefixed deny", acls: []Binding{
			allow(ResourceTopic, PatternPrefixed, "abc", alice, "*", OpWrite),
			deny(ResourceTopic, PatternPrefixed, "ab", alice, "*", OpWrite)}, want: false},
		{name: "prefixed allow not dominated by longer prefixed deny", acls: []Binding{
			allow(ResourceTopic, PatternPrefixed, "ab", alice, "*", OpWrite),
			deny(ResourceTopic, PatternPrefixed, "abc", alice, "*", OpWrite)}, want: true},
		{name: "wildcard deny", acls: []Binding{
			allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpWrite),
			deny(ResourceTopic, PatternLiteral, "*", alice, "*", OpWrite)}, want: false},
		{name: "wildcard allow", acls: []Binding{allow(ResourceTopic, PatternLiteral, "*", "User:*", "*", OpWrite)}, want: true},
		{name: "other principal", acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", bob, "*", OpWrite)}, want: false},
		{name: "super user", cfg: Config{SuperUsers: []string{alice}}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(tt.cfg, &staticSource{bs: tt.acls})
			if got := a.AuthorizeAny(Request{Principal: alice, Host: ip1}, OpWrite, ResourceTopic); got != tt.want {
				t.Fatalf("AuthorizeAny = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAuthorizedOps(t *testing.T) {
	a := New(Config{}, &staticSource{bs: []Binding{
		allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpWrite),
		allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpAlterConfigs),
	}})
	got := a.AuthorizedOps(Request{Principal: alice, Host: ip1}, ResourceTopic, "t", TopicOps)
	want := OpsBits([]Operation{OpWrite, OpDescribe, OpAlterConfigs, OpDescribeConfigs})
	if got != want {
		t.Fatalf("AuthorizedOps = %b, want %b", got, want)
	}
	// Kafka's bit field for all topic operations (what a client decodes).
	if all := OpsBits(TopicOps); all != 1<<3|1<<4|1<<5|1<<6|1<<7|1<<8|1<<10|1<<11 {
		t.Fatalf("OpsBits(TopicOps) = %b", all)
	}
}

func strp(s string) *string { return &s }

func TestFilterMatches(t *testing.T) {
	lit := allow(ResourceTopic, PatternLiteral, "orders", alice, "*", OpRead)
	wild := allow(ResourceTopic, PatternLiteral, "*", alice, "*", OpRead)
	pre := allow(ResourceTopic, PatternPrefixed, "ord", alice, "*", OpRead)
	grp := deny(ResourceGroup, PatternLiteral, "orders", bob, ip1, OpAll)
	all := []Binding{lit, wild, pre, grp}
	anyF := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	with := func(f func(*Filter)) Filter { g := anyF; f(&g); return g }
	tests := []struct {
		name   string
		filter Filter
		want   []Binding
	}{
		{name: "match everything", filter: anyF, want: all},
		{name: "resource type", filter: with(func(f *Filter) { f.ResourceType = ResourceGroup }), want: []Binding{grp}},
		{name: "ANY pattern, exact name", filter: with(func(f *Filter) { f.Name = strp("orders") }), want: []Binding{lit, grp}},
		{name: "LITERAL with name", filter: with(func(f *Filter) { f.Name = strp("orders"); f.PatternType = PatternLiteral }), want: []Binding{lit, grp}},
		{name: "LITERAL without name", filter: with(func(f *Filter) { f.PatternType = PatternLiteral }), want: []Binding{lit, wild, grp}},
		{name: "PREFIXED exact prefix", filter: with(func(f *Filter) { f.Name = strp("ord"); f.PatternType = PatternPrefixed }), want: []Binding{pre}},
		{name: "PREFIXED does not match longer names", filter: with(func(f *Filter) { f.Name = strp("orders"); f.PatternType = PatternPrefixed }), want: nil},
		{name: "MATCH applies to the name", filter: with(func(f *Filter) {
			f.Name = strp("orders")
			f.PatternType = PatternMatch
			f.ResourceType = ResourceTopic
		}), want: []Binding{lit, wild, pre}},
		{name: "MATCH of an unrelated name", filter: with(func(f *Filter) {
			f.Name = strp("billing")
			f.PatternType = PatternMatch
			f.ResourceType = ResourceTopic
		}), want: []Binding{wild}},
		{name: "MATCH without name matches all", filter: with(func(f *Filter) { f.PatternType = PatternMatch }), want: all},
		{name: "principal", filter: with(func(f *Filter) { f.Principal = strp(bob) }), want: []Binding{grp}},
		{name: "host", filter: with(func(f *Filter) { f.Host = strp(ip1) }), want: []Binding{grp}},
		{name: "operation is exact (ALL is not ANY)", filter: with(func(f *Filter) { f.Operation = OpRead }), want: []Binding{lit, wild, pre}},
		{name: "operation ALL", filter: with(func(f *Filter) { f.Operation = OpAll }), want: []Binding{grp}},
		{name: "permission", filter: with(func(f *Filter) { f.Permission = Deny }), want: []Binding{grp}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Binding
			for _, b := range all {
				if tt.filter.Matches(b) {
					got = append(got, b)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := allow(ResourceTopic, PatternLiteral, "t", alice, "*", OpRead)
	tests := []struct {
		name string
		mod  func(*Binding)
		ok   bool
	}{
		{name: "good", mod: func(*Binding) {}, ok: true},
		{name: "prefixed", mod: func(b *Binding) { b.PatternType = PatternPrefixed }, ok: true},
		{name: "ANY resource", mod: func(b *Binding) { b.ResourceType = ResourceAny }},
		{name: "unknown resource", mod: func(b *Binding) { b.ResourceType = 99 }},
		{name: "MATCH pattern", mod: func(b *Binding) { b.PatternType = PatternMatch }},
		{name: "ANY pattern", mod: func(b *Binding) { b.PatternType = PatternAny }},
		{name: "ANY operation", mod: func(b *Binding) { b.Operation = OpAny }},
		{name: "unknown operation", mod: func(b *Binding) { b.Operation = 0 }},
		{name: "ANY permission", mod: func(b *Binding) { b.Permission = PermissionAny }},
		{name: "empty name", mod: func(b *Binding) { b.ResourceName = "" }},
		{name: "cluster with another name", mod: func(b *Binding) { b.ResourceType = ResourceCluster; b.ResourceName = "c" }},
		{name: "cluster", mod: func(b *Binding) { b.ResourceType = ResourceCluster; b.ResourceName = ClusterName }, ok: true},
		{name: "principal without type", mod: func(b *Binding) { b.Principal = "alice" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := good
			tt.mod(&b)
			if err := b.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate(%v) = %v, want ok=%v", b, err, tt.ok)
			}
		})
	}
	if err := (Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Filter{ResourceType: 0, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}).Validate(); err == nil {
		t.Fatal("a filter with an UNKNOWN resource type was accepted")
	}
}

// BenchmarkAuthorize is one decision as a produce request makes it per
// topic, with 1,000 literal and 100 prefixed bindings of other topics and
// users besides the ones that decide.
func BenchmarkAuthorize(b *testing.B) {
	var bs []Binding
	for i := 0; i < 1000; i++ {
		bs = append(bs, allow(ResourceTopic, PatternLiteral, "topic-"+strconv.Itoa(i), "User:u"+strconv.Itoa(i), "*", OpWrite))
	}
	for i := 0; i < 100; i++ {
		bs = append(bs, allow(ResourceTopic, PatternPrefixed, "team-"+strconv.Itoa(i)+"-", "User:u"+strconv.Itoa(i), "*", OpRead))
	}
	bs = append(bs, allow(ResourceTopic, PatternPrefixed, "orders-", alice, "*", OpWrite))
	a := New(Config{}, &staticSource{bs: bs})
	r := Request{Principal: alice, Host: ip1}
	b.ReportAllocs()
	for b.Loop() {
		if !a.Authorize(r, OpWrite, ResourceTopic, "orders-eu-1") {
			b.Fatal("refused")
		}
	}
}

// superSource is a staticSource that also stores super users.
type superSource struct {
	staticSource
	super []string
}

func (s *superSource) StoredSuperUsers() []string { return s.super }

// The stored super users (SuperUserSource) join super.users: allowed
// whatever the ACLs say, DENY included; a change reaches decisions with
// the next generation.
func TestStoredSuperUsers(t *testing.T) {
	src := &superSource{staticSource: staticSource{bs: []Binding{deny(ResourceTopic, PatternLiteral, "t", alice, "*", OpAll)}}}
	a := New(Config{SuperUsers: []string{bob}}, src)
	r := Request{Principal: alice, Host: ip1}
	if a.Authorize(r, OpRead, ResourceTopic, "t") || a.Authorize(r, OpAlter, ResourceCluster, ClusterName) {
		t.Fatal("alice allowed before she is a stored super user")
	}
	src.super = []string{alice}
	if a.Authorize(r, OpAlter, ResourceCluster, ClusterName) {
		t.Fatal("the stored set changed without a new generation, yet the decision did")
	}
	src.gen.Add(1)
	for _, op := range []Operation{OpRead, OpWrite, OpDelete} {
		if !a.Authorize(r, op, ResourceTopic, "t") {
			t.Errorf("stored super user alice refused %v on t despite the DENY", op)
		}
	}
	if !a.Authorize(r, OpAlter, ResourceCluster, ClusterName) || !a.AuthorizeAny(r, OpWrite, ResourceTopic) {
		t.Error("stored super user alice refused on the cluster")
	}
	if got, want := a.AuthorizedOps(r, ResourceCluster, ClusterName, ClusterOps), OpsBits(ClusterOps); got != want {
		t.Errorf("authorized operations %b, want %b", got, want)
	}
	if !a.Authorize(Request{Principal: bob, Host: ip2}, OpAlter, ResourceCluster, ClusterName) {
		t.Error("super.users' bob refused")
	}
	src.super = nil
	src.gen.Add(1)
	if a.Authorize(r, OpAlter, ResourceCluster, ClusterName) {
		t.Error("alice still a super user once removed from the stored set")
	}
}
