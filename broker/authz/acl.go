package authz

import (
	"fmt"
	"strings"
)

// ResourceType is Kafka's ResourceType (kmsg.ACLResourceType numbers).
type ResourceType int8

// Resource types.
const (
	ResUnknown         ResourceType = 0
	ResAny             ResourceType = 1 // filters only
	ResTopic           ResourceType = 2
	ResGroup           ResourceType = 3
	ResCluster         ResourceType = 4
	ResTransactionalID ResourceType = 5
	ResDelegationToken ResourceType = 6
	ResUser            ResourceType = 7
)

// PatternType is Kafka's PatternType (kmsg.ACLResourcePatternType numbers).
type PatternType int8

// Pattern types. ANY and MATCH are for filters only.
const (
	PatUnknown  PatternType = 0
	PatAny      PatternType = 1
	PatMatch    PatternType = 2
	PatLiteral  PatternType = 3
	PatPrefixed PatternType = 4
)

// Operation is Kafka's AclOperation (kmsg.ACLOperation numbers).
type Operation int8

// Operations. ANY is for filters only.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
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

// Permission is Kafka's AclPermissionType (kmsg.ACLPermissionType numbers).
type Permission int8

// Permissions. ANY is for filters only.
const (
	PermUnknown Permission = 0
	PermAny     Permission = 1
	PermDeny    Permission = 2
	PermAllow   Permission = 3
)

// Wildcard is the literal resource name, principal name and host that
// match everything.
const Wildcard = "*"

// ClusterName is the only name of the CLUSTER resource.
const ClusterName = "kafka-cluster"

// WildcardPrincipal is the principal of an ACL for every user.
const WildcardPrincipal = "User:*"

// ACL is one access control binding: a resource pattern and an entry.
// Principal is Kafka's "Type:name" form.
type ACL struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string
	Host         string
	Operation    Operation
	Permission   Permission
}

// String is a readable form, for logs and test output.
func (a ACL) String() string {
	return fmt.Sprintf("%s:%s:%s %s %s@%s %s", a.ResourceType, a.PatternType, a.ResourceName,
		a.Permission, a.Principal, a.Host, a.Operation)
}

// Filter selects ACLs, as Kafka's AclBindingFilter: an empty name,
// principal or host (Nil*) matches any; ANY matches any type, operation or
// permission; PatternType MATCH matches the patterns that would apply to
// the named resource (the literal name, the literal "*" and every prefix).
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// ValidationError is a binding or filter Kafka refuses with INVALID_REQUEST.
type ValidationError struct{ Msg string }

func (e *ValidationError) Error() string { return e.Msg }

func invalid(format string, args ...any) error {
	return &ValidationError{Msg: fmt.Sprintf(format, args...)}
}

// ValidateACL checks a binding to create as Kafka's AclControlManager and
// AclApis do; every failure is INVALID_REQUEST.
func ValidateACL(a ACL) error {
	switch a.ResourceType {
	case ResTopic, ResGroup, ResCluster, ResTransactionalID, ResDelegationToken, ResUser:
	default:
		return invalid("invalid resourceType %d", a.ResourceType)
	}
	switch a.PatternType {
	case PatLiteral, PatPrefixed:
	default:
		return invalid("invalid patternType %d", a.PatternType)
	}
	if a.Operation <= OpAny || a.Operation > OpDescribeTokens {
		return invalid("invalid operation %d", a.Operation)
	}
	switch a.Permission {
	case PermDeny, PermAllow:
	default:
		return invalid("invalid permissionType %d", a.Permission)
	}
	if a.ResourceName == "" {
		return invalid("invalid empty resource name")
	}
	if a.ResourceType == ResCluster && a.ResourceName != ClusterName {
		return invalid("the only valid name for the CLUSTER resource is %s", ClusterName)
	}
	if _, _, err := ParsePrincipal(a.Principal); err != nil {
		return invalid("invalid principal %q: %v", a.Principal, err)
	}
	if a.Host == "" {
		return invalid("invalid null host")
	}
	return nil
}

// ValidateFilter checks a DescribeAcls or DeleteAcls filter: Kafka refuses
// one with an unknown part (INVALID_REQUEST).
func ValidateFilter(f Filter) error {
	if f.ResourceType == ResUnknown || f.ResourceType > ResUser || f.ResourceType < 0 {
		return invalid("unknown resource type %d in filter", f.ResourceType)
	}
	if f.PatternType == PatUnknown || f.PatternType > PatPrefixed || f.PatternType < 0 {
		return invalid("unknown pattern type %d in filter", f.PatternType)
	}
	if f.Operation == OpUnknown || f.Operation > OpDescribeTokens || f.Operation < 0 {
		return invalid("unknown operation %d in filter", f.Operation)
	}
	if f.Permission == PermUnknown || f.Permission > PermAllow || f.Permission < 0 {
		return invalid("unknown permission type %d in filter", f.Permission)
	}
	return nil
}

// ParsePrincipal splits "Type:name" (Kafka's SecurityUtils.parseKafkaPrincipal).
func ParsePrincipal(s string) (typ, name string, err error) {
	i := strings.IndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return "", "", fmt.Errorf("expected a string in format principalType:principalName")
	}
	return s[:i], s[i+1:], nil
}

// Matches reports whether the filter selects the binding (Kafka's
// AclBindingFilter.matches).
func (f Filter) Matches(a ACL) bool {
	if f.ResourceType != ResAny && f.ResourceType != a.ResourceType {
		return false
	}
	switch f.PatternType {
	case PatAny:
		if f.ResourceName != nil && *f.ResourceName != a.ResourceName {
			return false
		}
	case PatMatch:
		if f.ResourceName != nil {
			n := *f.ResourceName
			switch a.PatternType {
			case PatLiteral:
				if a.ResourceName != n && a.ResourceName != Wildcard {
					return false
				}
			case PatPrefixed:
				if !strings.HasPrefix(n, a.ResourceName) {
					return false
				}
			default:
				return false
			}
		}
	default:
		if f.PatternType != a.PatternType {
			return false
		}
		if f.ResourceName != nil && *f.ResourceName != a.ResourceName {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != a.Principal {
		return false
	}
	if f.Host != nil && *f.Host != a.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != a.Operation {
		return false
	}
	if f.Permission != PermAny && f.Permission != a.Permission {
		return false
	}
	return true
}

var resNames = map[ResourceType]string{ResUnknown: "UNKNOWN", ResAny: "ANY", ResTopic: "TOPIC", ResGroup: "GROUP",
	ResCluster: "CLUSTER", ResTransactionalID: "TRANSACTIONAL_ID", ResDelegationToken: "DELEGATION_TOKEN", ResUser: "USER"}
var patNames = map[PatternType]string{PatUnknown: "UNKNOWN", PatAny: "ANY", PatMatch: "MATCH", PatLiteral: "LITERAL", PatPrefixed: "PREFIXED"}
var permNames = map[Permission]string{PermUnknown: "UNKNOWN", PermAny: "ANY", PermDeny: "DENY", PermAllow: "ALLOW"}
var opNames = map[Operation]string{OpUnknown: "UNKNOWN", OpAny: "ANY", OpAll: "ALL", OpRead: "READ", OpWrite: "WRITE",
	OpCreate: "CREATE", OpDelete: "DELETE", OpAlter: "ALTER", OpDescribe: "DESCRIBE", OpClusterAction: "CLUSTER_ACTION",
	OpDescribeConfigs: "DESCRIBE_CONFIGS", OpAlterConfigs: "ALTER_CONFIGS", OpIdempotentWrite: "IDEMPOTENT_WRITE",
	OpCreateTokens: "CREATE_TOKENS", OpDescribeTokens: "DESCRIBE_TOKENS"}

// String returns Kafka's name, e.g. "TOPIC".
func (t ResourceType) String() string { return name(resNames, t) }

// String returns Kafka's name, e.g. "PREFIXED".
func (t PatternType) String() string { return name(patNames, t) }

// String returns Kafka's name, e.g. "DESCRIBE_CONFIGS".
func (o Operation) String() string { return name(opNames, o) }

// String returns Kafka's name, e.g. "ALLOW".
func (p Permission) String() string { return name(permNames, p) }

func name[K ~int8](m map[K]string, k K) string {
	if s, ok := m[k]; ok {
		return s
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(k))
}

func parse[K ~int8](m map[K]string, s string) (K, bool) {
	s = strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	for k, v := range m {
		if v == s && v != "UNKNOWN" {
			return k, true
		}
	}
	return 0, false
}

// ParseResourceType reads a Kafka resource type name (case-insensitive,
// '-' for '_'): "topic", "TRANSACTIONAL_ID", "any".
func ParseResourceType(s string) (ResourceType, bool) { return parse(resNames, s) }

// ParsePatternType reads a pattern type name: "literal", "prefixed", "any", "match".
func ParsePatternType(s string) (PatternType, bool) { return parse(patNames, s) }

// ParseOperation reads an operation name: "read", "describe-configs", "all", "any".
func ParseOperation(s string) (Operation, bool) { return parse(opNames, s) }

// ParsePermission reads a permission name: "allow", "deny", "any".
func ParsePermission(s string) (Permission, bool) { return parse(permNames, s) }

// ParseACL reads the form String writes,
// "TOPIC:LITERAL:orders ALLOW User:alice@* READ" (for tests and tools).
func ParseACL(s string) (ACL, error) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return ACL{}, fmt.Errorf("acl %q: want TYPE:PATTERN:name PERMISSION principal@host OPERATION", s)
	}
	res := strings.SplitN(f[0], ":", 3)
	at := strings.LastIndexByte(f[2], '@')
	if len(res) != 3 || at < 0 {
		return ACL{}, fmt.Errorf("acl %q: want TYPE:PATTERN:name PERMISSION principal@host OPERATION", s)
	}
	var a ACL
	var ok [4]bool
	a.ResourceType, ok[0] = ParseResourceType(res[0])
	a.PatternType, ok[1] = ParsePatternType(res[1])
	a.ResourceName = res[2]
	a.Permission, ok[2] = ParsePermission(f[1])
	a.Principal, a.Host = f[2][:at], f[2][at+1:]
	a.Operation, ok[3] = ParseOperation(f[3])
	if !ok[0] || !ok[1] || !ok[2] || !ok[3] {
		return ACL{}, fmt.Errorf("acl %q: unknown name", s)
	}
	return a, nil
}
