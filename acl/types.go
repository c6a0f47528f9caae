// Package acl is Sluice's authorizer: ACL bindings with Kafka's codes,
// names and filter semantics, and the decision whether a principal at a
// host may perform an operation on a resource, as Kafka's
// StandardAuthorizer decides it (doc.go has the rules). It knows nothing of
// the wire protocol or of storage: the server asks it, the metastore stores
// its bindings.
package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceType is Kafka's org.apache.kafka.common.resource.ResourceType,
// by wire code.
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

var resourceNames = map[ResourceType]string{
	ResourceUnknown: "UNKNOWN", ResourceAny: "ANY", ResourceTopic: "TOPIC", ResourceGroup: "GROUP",
	ResourceCluster: "CLUSTER", ResourceTransactionalID: "TRANSACTIONAL_ID",
	ResourceDelegationToken: "DELEGATION_TOKEN", ResourceUser: "USER",
}

func (r ResourceType) String() string {
	if s, ok := resourceNames[r]; ok {
		return s
	}
	return "UNKNOWN"
}

// Known reports whether r is a code Kafka defines other than UNKNOWN
// (Kafka maps every other code to UNKNOWN).
func (r ResourceType) Known() bool { return r >= ResourceAny && r <= ResourceUser }

// PatternType is Kafka's PatternType: how a binding's resource name matches.
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters: any pattern type, exact name
	PatternMatch    PatternType = 2 // filters: every binding that applies to the name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

func (p PatternType) String() string {
	switch p {
	case PatternAny:
		return "ANY"
	case PatternMatch:
		return "MATCH"
	case PatternLiteral:
		return "LITERAL"
	case PatternPrefixed:
		return "PREFIXED"
	}
	return "UNKNOWN"
}

// Known reports whether p is a defined code other than UNKNOWN.
func (p PatternType) Known() bool { return p >= PatternAny && p <= PatternPrefixed }

// Operation is Kafka's AclOperation.
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

var opNames = map[Operation]string{
	OpUnknown: "UNKNOWN", OpAny: "ANY", OpAll: "ALL", OpRead: "READ", OpWrite: "WRITE",
	OpCreate: "CREATE", OpDelete: "DELETE", OpAlter: "ALTER", OpDescribe: "DESCRIBE",
	OpClusterAction: "CLUSTER_ACTION", OpDescribeConfigs: "DESCRIBE_CONFIGS",
	OpAlterConfigs: "ALTER_CONFIGS", OpIdempotentWrite: "IDEMPOTENT_WRITE",
	OpCreateTokens: "CREATE_TOKENS", OpDescribeTokens: "DESCRIBE_TOKENS",
}

func (o Operation) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return "UNKNOWN"
}

// Known reports whether o is a defined code other than UNKNOWN.
func (o Operation) Known() bool { return o >= OpAny && o <= OpDescribeTokens }

// Permission is Kafka's AclPermissionType.
type Permission int8

const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	Deny              Permission = 2
	Allow             Permission = 3
)

func (p Permission) String() string {
	switch p {
	case PermissionAny:
		return "ANY"
	case Deny:
		return "DENY"
	case Allow:
		return "ALLOW"
	}
	return "UNKNOWN"
}

// Known reports whether p is a defined code other than UNKNOWN.
func (p Permission) Known() bool { return p >= PermissionAny && p <= Allow }

// Wildcards, as Kafka spells them.
const (
	WildcardResource  = "*"      // a LITERAL name matching every resource of its type
	WildcardPrincipal = "User:*" // every user
	WildcardHost      = "*"      // every host
	// ClusterName is the only name of the CLUSTER resource.
	ClusterName = "kafka-cluster"
	// Anonymous is the principal of an unauthenticated connection.
	Anonymous = "User:ANONYMOUS"
)

// Binding is one ACL: a resource pattern and an access control entry.
type Binding struct {
	ResourceType ResourceType `json:"rt"`
	ResourceName string       `json:"rn"`
	PatternType  PatternType  `json:"pt"`
	Principal    string       `json:"p"`
	Host         string       `json:"h"`
	Operation    Operation    `json:"op"`
	Permission   Permission   `json:"perm"`
}

func (b Binding) String() string {
	return fmt.Sprintf("(pattern=%s:%s:%s, principal=%s, host=%s, operation=%s, permission=%s)",
		b.ResourceType, b.PatternType, b.ResourceName, b.Principal, b.Host, b.Operation, b.Permission)
}

// Key is a canonical encoding of b: two bindings are the same ACL exactly
// when their keys are equal (the metastore keys its bucket by it).
func (b Binding) Key() string {
	return fmt.Sprintf("%d\x00%d\x00%s\x00%s\x00%s\x00%d\x00%d", b.ResourceType, b.PatternType, b.ResourceName,
		b.Principal, b.Host, b.Operation, b.Permission)
}

// ErrInvalid marks a binding or filter Kafka refuses with INVALID_REQUEST.
var ErrInvalid = errors.New("invalid ACL")

// Validate checks a binding to be created as Kafka's controller does
// (AclControlManager.validateNewAcl, and the broker's checks before it):
// a concrete resource type, pattern type, operation and permission, a
// non-empty name (kafka-cluster for CLUSTER) and a principal of the form
// Type:name.
func (b Binding) Validate() error {
	switch {
	case !b.ResourceType.Known() || b.ResourceType == ResourceAny:
		return fmt.Errorf("%w: invalid resource type %s", ErrInvalid, b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return fmt.Errorf("%w: invalid pattern type %s", ErrInvalid, b.PatternType)
	case !b.Operation.Known() || b.Operation == OpAny:
		return fmt.Errorf("%w: invalid operation %s", ErrInvalid, b.Operation)
	case b.Permission != Allow && b.Permission != Deny:
		return fmt.Errorf("%w: invalid permission type %s", ErrInvalid, b.Permission)
	case b.ResourceName == "":
		return fmt.Errorf("%w: resource name should not be empty", ErrInvalid)
	case b.ResourceType == ResourceCluster && b.ResourceName != ClusterName:
		return fmt.Errorf("%w: the only valid name for the CLUSTER resource is %s", ErrInvalid, ClusterName)
	}
	if i := strings.IndexByte(b.Principal, ':'); i <= 0 {
		return fmt.Errorf("%w: could not parse principal from %q (no colon is present separating the principal type from the principal name)", ErrInvalid, b.Principal)
	}
	return nil
}

// Filter selects bindings (DescribeAcls, DeleteAcls). A nil string field
// matches anything; ANY codes match any value; PatternMatch selects the
// bindings that apply to Name (literal equal, the literal wildcard, and
// prefixes of it).
type Filter struct {
	ResourceType ResourceType `json:"rt"`
	Name         *string      `json:"rn,omitempty"`
	PatternType  PatternType  `json:"pt"`
	Principal    *string      `json:"p,omitempty"`
	Host         *string      `json:"h,omitempty"`
	Operation    Operation    `json:"op"`
	Permission   Permission   `json:"perm"`
}

// Validate refuses a filter with an UNKNOWN (or undefined) element, as
// Kafka's DescribeAclsRequest and DeleteAclsRequest do.
func (f Filter) Validate() error {
	switch {
	case !f.ResourceType.Known():
		return fmt.Errorf("%w: unknown resource type in filter", ErrInvalid)
	case !f.PatternType.Known():
		return fmt.Errorf("%w: unknown pattern type in filter", ErrInvalid)
	case !f.Operation.Known():
		return fmt.Errorf("%w: unknown operation in filter", ErrInvalid)
	case !f.Permission.Known():
		return fmt.Errorf("%w: unknown permission type in filter", ErrInvalid)
	}
	return nil
}

// Matches reports whether b is selected by f (Kafka's
// AclBindingFilter.matches: ResourcePatternFilter and
// AccessControlEntryFilter).
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.Name != nil {
		name := *f.Name
		switch {
		case f.PatternType == PatternAny || f.PatternType == b.PatternType:
			if name != b.ResourceName {
				return false
			}
		case b.PatternType == PatternLiteral:
			if name != b.ResourceName && b.ResourceName != WildcardResource {
				return false
			}
		case b.PatternType == PatternPrefixed:
			if !strings.HasPrefix(name, b.ResourceName) {
				return false
			}
		default:
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == b.Permission
}
