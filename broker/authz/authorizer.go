package authz

import (
	"fmt"
	"strings"
)

// StandardAuthorizerClass is the authorizer.class.name that turns
// authorization on: Kafka's KRaft authorizer, the only one Kafka 4 ships.
const StandardAuthorizerClass = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// CheckClassName validates authorizer.class.name: empty means no
// authorizer; StandardAuthorizerClass turns it on; anything else is an
// error at start (Kafka 4 removed the ZooKeeper AclAuthorizer, and Strata
// loads no Java classes).
func CheckClassName(name string) (enabled bool, err error) {
	switch strings.TrimSpace(name) {
	case "":
		return false, nil
	case StandardAuthorizerClass:
		return true, nil
	case "kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer":
		return false, fmt.Errorf("authorizer.class.name=%s: the ZooKeeper authorizer was removed in Kafka 4.0; use %s", name, StandardAuthorizerClass)
	}
	return false, fmt.Errorf("authorizer.class.name=%s: unknown authorizer; the only one supported is %s", name, StandardAuthorizerClass)
}

// ParseSuperUsers parses super.users: principals separated by ';'
// ("User:a;User:b"), as Kafka does; blanks are dropped.
func ParseSuperUsers(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if _, _, err := ParsePrincipal(p); err != nil {
			return nil, fmt.Errorf("super.users: %q: %v", p, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Config is the authorizer's part of the broker configuration.
type Config struct {
	SuperUsers                []string // super.users
	AllowEveryoneIfNoACLFound bool     // allow.everyone.if.no.acl.found
}

// Authorizer answers access questions over one immutable set of ACLs.
// It is safe for concurrent use: nothing in it changes after New; a
// change of ACLs builds a new one.
type Authorizer struct {
	super    map[string]bool
	allowNo  bool
	literal  map[ResourceType]map[string][]ACL // includes the literal wildcard "*"
	prefixed map[ResourceType][]ACL
	acls     []ACL
}

// New builds an Authorizer. acls is not retained.
func New(cfg Config, acls []ACL) *Authorizer {
	a := &Authorizer{
		super:    map[string]bool{},
		allowNo:  cfg.AllowEveryoneIfNoACLFound,
		literal:  map[ResourceType]map[string][]ACL{},
		prefixed: map[ResourceType][]ACL{},
		acls:     append([]ACL(nil), acls...),
	}
	for _, s := range cfg.SuperUsers {
		a.super[s] = true
	}
	for _, acl := range a.acls {
		switch acl.PatternType {
		case PatLiteral:
			m := a.literal[acl.ResourceType]
			if m == nil {
				m = map[string][]ACL{}
				a.literal[acl.ResourceType] = m
			}
			m[acl.ResourceName] = append(m[acl.ResourceName], acl)
		case PatPrefixed:
			a.prefixed[acl.ResourceType] = append(a.prefixed[acl.ResourceType], acl)
		}
	}
	return a
}

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.super[principal] }

// Authorize is the StandardAuthorizer decision for principal ("User:x")
// connecting from host (an IP address) doing op on the named resource.
func (a *Authorizer) Authorize(principal, host string, op Operation, rt ResourceType, name string) bool {
	if a.super[principal] {
		return true
	}
	found, allow, deny := false, false, false
	visit := func(acls []ACL) {
		for _, acl := range acls {
			found = true
			switch matchEntry(acl, principal, host, op) {
			case PermDeny:
				deny = true
			case PermAllow:
				allow = true
			}
		}
	}
	if m := a.literal[rt]; m != nil {
		visit(m[name])
		if name != Wildcard {
			visit(m[Wildcard])
		}
	}
	for _, acl := range a.prefixed[rt] {
		if strings.HasPrefix(name, acl.ResourceName) {
			visit([]ACL{acl})
		}
	}
	switch {
	case deny:
		return false
	case allow:
		return true
	case !found:
		return a.allowNo
	}
	return false
}

// matchEntry returns the ACL's permission if it applies to the principal,
// host and operation, else PermUnknown (StandardAuthorizerData.findResult).
func matchEntry(acl ACL, principal, host string, op Operation) Permission {
	if !principalMatches(acl.Principal, principal) {
		return PermUnknown
	}
	if acl.Host != Wildcard && acl.Host != host {
		return PermUnknown
	}
	if acl.Operation != OpAll && acl.Operation != op {
		if acl.Permission != PermAllow || !implies(acl.Operation, op) {
			return PermUnknown
		}
	}
	return acl.Permission
}

// principalMatches reports whether an ACL's principal names principal:
// the same one, or the wildcard of its type ("User:*" for "User:alice"),
// as StandardAuthorizerData.matchingPrincipals.
func principalMatches(aclPrincipal, principal string) bool {
	if aclPrincipal == principal {
		return true
	}
	typ, _, err := ParsePrincipal(principal)
	return err == nil && aclPrincipal == typ+":"+Wildcard
}

// implies reports whether an ALLOW of have also allows want.
func implies(have, want Operation) bool {
	switch want {
	case OpDescribe:
		return have == OpRead || have == OpWrite || have == OpDelete || have == OpAlter
	case OpDescribeConfigs:
		return have == OpAlterConfigs
	}
	return false
}

// AuthorizeAny reports whether principal may do op on at least one
// resource of type rt: Kafka's Authorizer.authorizeByResourceType, which
// KIP-679 uses for an idempotent producer holding WRITE on any topic.
// Super users and a principal allowed op on a resource without ACLs (a
// hard-coded probe name, as Kafka) are allowed; a DENY of op on the
// literal "*" denies; otherwise some ALLOW must not be shadowed by a DENY
// of the same literal name or of a prefix of it.
func (a *Authorizer) AuthorizeAny(principal, host string, op Operation, rt ResourceType) bool {
	if a.Authorize(principal, host, op, rt, "hardcode") {
		return true
	}
	var allowLit, allowPre []string
	denyLit, denyPre := map[string]bool{}, map[string]bool{}
	for _, acl := range a.acls {
		if acl.ResourceType != rt {
			continue
		}
		if !principalMatches(acl.Principal, principal) {
			continue
		}
		if acl.Host != Wildcard && acl.Host != host {
			continue
		}
		if acl.Operation != op && acl.Operation != OpAll {
			continue
		}
		switch {
		case acl.Permission == PermDeny && acl.PatternType == PatLiteral:
			if acl.ResourceName == Wildcard {
				return false
			}
			denyLit[acl.ResourceName] = true
		case acl.Permission == PermDeny && acl.PatternType == PatPrefixed:
			denyPre[acl.ResourceName] = true
		case acl.Permission == PermAllow && acl.PatternType == PatLiteral:
			allowLit = append(allowLit, acl.ResourceName)
		case acl.Permission == PermAllow && acl.PatternType == PatPrefixed:
			allowPre = append(allowPre, acl.ResourceName)
		}
	}
	shadowed := func(name string) bool {
		for i := 0; i <= len(name); i++ {
			if denyPre[name[:i]] {
				return true
			}
		}
		return false
	}
	for _, n := range allowLit {
		if !denyLit[n] && !shadowed(n) {
			return true
		}
	}
	for _, n := range allowPre {
		if !shadowed(n) {
			return true
		}
	}
	return false
}
