package authz

import (
	"fmt"
	"strings"
	"testing"
)

func acl(t *testing.T, s string) ACL {
	t.Helper()
	a, err := ParseACL(s)
	if err != nil {
		t.Fatal(err)
	}
	if a.String() != s {
		t.Fatalf("acl %q round trips as %q", s, a.String())
	}
	return a
}

func lookup[K comparable](t *testing.T, m map[K]string, name string) K {
	t.Helper()
	for k, v := range m {
		if v == name {
			return k
		}
	}
	t.Fatalf("unknown name %q", name)
	var zero K
	return zero
}

func TestAuthorize(t *testing.T) {
	type check struct {
		principal, host string
		op              string
		res             string // TYPE:name
		want            bool
	}
	cases := []struct {
		name       string
		super      []string
		allowNoACL bool
		acls       []string
		checks     []check
	}{
		{name: "no acls, default deny", checks: []check{
			{"User:alice", "127.0.0.1", "READ", "TOPIC:orders", false},
			{"User:ANONYMOUS", "127.0.0.1", "DESCRIBE", "CLUSTER:kafka-cluster", false},
		}},
		{name: "no acls, allow.everyone.if.no.acl.found", allowNoACL: true, checks: []check{
			{"User:alice", "127.0.0.1", "READ", "TOPIC:orders", true},
			{"User:alice", "127.0.0.1", "ALTER", "CLUSTER:kafka-cluster", true},
		}},
		{name: "super user beats deny", super: []string{"User:admin", "User:broker"}, acls: []string{
			"TOPIC:LITERAL:* DENY User:*@* ALL",
		}, checks: []check{
			{"User:admin", "10.0.0.1", "WRITE", "TOPIC:orders", true},
			{"User:broker", "10.0.0.1", "CLUSTER_ACTION", "CLUSTER:kafka-cluster", true},
			{"User:alice", "10.0.0.1", "WRITE", "TOPIC:orders", false},
		}},
		{name: "acl on the resource turns allow.everyone off for it", allowNoACL: true, acls: []string{
			"TOPIC:LITERAL:orders ALLOW User:alice@* READ",
		}, checks: []check{
			{"User:alice", "127.0.0.1", "READ", "TOPIC:orders", true},
			{"User:bob", "127.0.0.1", "READ", "TOPIC:orders", false},
			{"User:alice", "127.0.0.1", "WRITE", "TOPIC:orders", false},
			{"User:bob", "127.0.0.1", "READ", "TOPIC:payments", true},
			{"User:bob", "127.0.0.1", "READ", "GROUP:orders", true},
		}},
		{name: "deny wins over allow", acls: []string{
			"TOPIC:LITERAL:orders ALLOW User:alice@* ALL",
			"TOPIC:PREFIXED:ord DENY User:alice@10.0.0.9 WRITE",
		}, checks: []check{
			{"User:alice", "127.0.0.1", "WRITE", "TOPIC:orders", true},
			{"User:alice", "10.0.0.9", "WRITE", "TOPIC:orders", false},
			{"User:alice", "10.0.0.9", "READ", "TOPIC:orders", true},
		}},
		{name: "deny implies nothing", acls: []string{
			"TOPIC:LITERAL:orders ALLOW User:alice@* DESCRIBE",
			"TOPIC:LITERAL:orders DENY User:alice@* READ",
		}, checks: []check{
			{"User:alice", "127.0.0.1", "DESCRIBE", "TOPIC:orders", true},
			{"User:alice", "127.0.0.1", "READ", "TOPIC:orders", false},
		}},
		{name: "deny ALL denies everything", acls: []string{
			"TOPIC:LITERAL:orders ALLOW User:alice@* READ",
			"TOPIC:LITERAL:orders DENY User:alice@* ALL",
		}, checks: []check{
			{"User:alice", "127.0.0.1", "READ", "TOPIC:orders", false},
			{"User:alice", "127.0.0.1", "DESCRIBE", "TOPIC:orders", false},
		}},
		{name: "implied operations", acls: []string{
			"TOPIC:LITERAL:r ALLOW User:alice@* READ",
			"TOPIC:LITERAL:w ALLOW User:alice@* WRITE",
			"TOPIC:LITERAL:d ALLOW User:alice@* DELETE",
			"TOPIC:LITERAL:a ALLOW User:alice@* ALTER",
			"TOPIC:LITERAL:c ALLOW User:alice@* CREATE",
			"TOPIC:LITERAL:ac ALLOW User:alice@* ALTER_CONFIGS",
			"TOPIC:LITERAL:dc ALLOW User:alice@* DESCRIBE_CONFIGS",
		}, checks: []check{
			{"User:alice", "h", "DESCRIBE", "TOPIC:r", true},
			{"User:alice", "h", "DESCRIBE", "TOPIC:w", true},
			{"User:alice", "h", "DESCRIBE", "TOPIC:d", true},
			{"User:alice", "h", "DESCRIBE", "TOPIC:a", true},
			{"User:alice", "h", "DESCRIBE", "TOPIC:c", false},
			{"User:alice", "h", "DESCRIBE", "TOPIC:ac", false},
			{"User:alice", "h", "DESCRIBE_CONFIGS", "TOPIC:ac", true},
			{"User:alice", "h", "ALTER_CONFIGS", "TOPIC:dc", false},
			{"User:alice", "h", "DESCRIBE_CONFIGS", "TOPIC:a", false}, // ALTER does not imply DESCRIBE_CONFIGS
			{"User:alice", "h", "ALTER_CONFIGS", "TOPIC:a", false},
			{"User:alice", "h", "READ", "TOPIC:w", false},
			{"User:alice", "h", "WRITE", "TOPIC:r", false},
		}},
		{name: "literal, prefixed and wildcard names", acls: []string{
			"TOPIC:LITERAL:orders ALLOW User:alice@* READ",
			"TOPIC:PREFIXED:pay ALLOW User:alice@* READ",
			"GROUP:LITERAL:* ALLOW User:alice@* READ",
		}, checks: []check{
			{"User:alice", "h", "READ", "TOPIC:orders", true},
			{"User:alice", "h", "READ", "TOPIC:orders2", false},
			{"User:alice", "h", "READ", "TOPIC:order", false},
			{"User:alice", "h", "READ", "TOPIC:payments", true},
			{"User:alice", "h", "READ", "TOPIC:pay", true},
			{"User:alice", "h", "READ", "TOPIC:pa", false},
			{"User:alice", "h", "READ", "GROUP:anything", true},
			{"User:alice", "h", "READ", "TRANSACTIONAL_ID:anything", false},
		}},
		{name: "a literal ACL named * is the wildcard, a prefixed * is not", acls: []string{
			"TOPIC:PREFIXED:* ALLOW User:alice@* READ",
		}, checks: []check{
			{"User:alice", "h", "READ", "TOPIC:orders", false},
			{"User:alice", "h", "READ", "TOPIC:*x", true},
		}},
		{name: "wildcard principal and host", acls: []string{
			"TOPIC:LITERAL:orders ALLOW User:*@* READ",
			"TOPIC:LITERAL:payments ALLOW User:bob@10.1.1.1 WRITE",
		}, checks: []check{
			{"User:anyone", "h", "READ", "TOPIC:orders", true},
			{"User:ANONYMOUS", "h", "READ", "TOPIC:orders", true},
			{"User:bob", "10.1.1.1", "WRITE", "TOPIC:payments", true},
			{"User:bob", "10.1.1.2", "WRITE", "TOPIC:payments", false},
			{"User:carol", "10.1.1.1", "WRITE", "TOPIC:payments", false},
			{"Group:ops", "h", "READ", "TOPIC:orders", false}, // User:* is the wildcard of users only
		}},
		{name: "the wildcard of another principal type", acls: []string{
			"TOPIC:LITERAL:orders ALLOW Group:*@* READ",
		}, checks: []check{
			{"Group:ops", "h", "READ", "TOPIC:orders", true},
			{"User:ops", "h", "READ", "TOPIC:orders", false},
		}},
		{name: "wildcard deny beats literal allow", acls: []string{
			"TOPIC:LITERAL:orders ALLOW User:alice@* READ",
			"TOPIC:LITERAL:* DENY User:*@10.6.6.6 READ",
		}, checks: []check{
			{"User:alice", "127.0.0.1", "READ", "TOPIC:orders", true},
			{"User:alice", "10.6.6.6", "READ", "TOPIC:orders", false},
		}},
		{name: "resource types are separate", acls: []string{
			"GROUP:LITERAL:g ALLOW User:alice@* READ",
			"TRANSACTIONAL_ID:LITERAL:tx ALLOW User:alice@* WRITE",
			"CLUSTER:LITERAL:kafka-cluster ALLOW User:alice@* IDEMPOTENT_WRITE",
		}, checks: []check{
			{"User:alice", "h", "READ", "GROUP:g", true},
			{"User:alice", "h", "READ", "TOPIC:g", false},
			{"User:alice", "h", "WRITE", "TRANSACTIONAL_ID:tx", true},
			{"User:alice", "h", "DESCRIBE", "TRANSACTIONAL_ID:tx", true},
			{"User:alice", "h", "IDEMPOTENT_WRITE", "CLUSTER:kafka-cluster", true},
			{"User:alice", "h", "CLUSTER_ACTION", "CLUSTER:kafka-cluster", false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var acls []ACL
			for _, s := range tc.acls {
				acls = append(acls, acl(t, s))
			}
			a := New(Config{SuperUsers: tc.super, AllowEveryoneIfNoACLFound: tc.allowNoACL}, acls)
			for _, c := range tc.checks {
				rt, name, _ := strings.Cut(c.res, ":")
				got := a.Authorize(c.principal, c.host, lookup(t, opNames, c.op), lookup(t, resNames, rt), name)
				if got != c.want {
					t.Errorf("%s@%s %s %s = %v, want %v", c.principal, c.host, c.op, c.res, got, c.want)
				}
			}
		})
	}
}

func TestAuthorizeAny(t *testing.T) {
	cases := []struct {
		name       string
		allowNoACL bool
		acls       []string
		want       bool
	}{
		{name: "nothing", want: false},
		{name: "allow everyone and no acls", allowNoACL: true, want: true},
		{name: "one literal write", acls: []string{"TOPIC:LITERAL:orders ALLOW User:alice@* WRITE"}, want: true},
		{name: "write ALL", acls: []string{"TOPIC:PREFIXED:o ALLOW User:alice@* ALL"}, want: true},
		{name: "read does not count", acls: []string{"TOPIC:LITERAL:orders ALLOW User:alice@* READ"}, want: false},
		{name: "other principal", acls: []string{"TOPIC:LITERAL:orders ALLOW User:bob@* WRITE"}, want: false},
		{name: "other host", acls: []string{"TOPIC:LITERAL:orders ALLOW User:alice@10.0.0.2 WRITE"}, want: false},
		{name: "shadowed by literal deny", acls: []string{
			"TOPIC:LITERAL:orders ALLOW User:alice@* WRITE",
			"TOPIC:LITERAL:orders DENY User:alice@* WRITE",
		}, want: false},
		{name: "shadowed by prefix deny", acls: []string{
			"TOPIC:PREFIXED:orders-eu ALLOW User:alice@* WRITE",
			"TOPIC:LITERAL:orders-us ALLOW User:alice@* WRITE",
			"TOPIC:PREFIXED:orders DENY User:*@* WRITE",
		}, want: false},
		{name: "one of two not shadowed", acls: []string{
			"TOPIC:LITERAL:orders ALLOW User:alice@* WRITE",
			"TOPIC:LITERAL:payments ALLOW User:alice@* WRITE",
			"TOPIC:LITERAL:orders DENY User:alice@* WRITE",
		}, want: true},
		{name: "wildcard deny", acls: []string{
			"TOPIC:LITERAL:orders ALLOW User:alice@* WRITE",
			"TOPIC:LITERAL:* DENY User:alice@* WRITE",
		}, want: false},
		{name: "a deny on a longer prefix does not shadow", acls: []string{
			"TOPIC:PREFIXED:ord ALLOW User:alice@* WRITE",
			"TOPIC:PREFIXED:orders DENY User:alice@* WRITE",
		}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var acls []ACL
			for _, s := range tc.acls {
				acls = append(acls, acl(t, s))
			}
			a := New(Config{AllowEveryoneIfNoACLFound: tc.allowNoACL}, acls)
			if got := a.AuthorizeAny("User:alice", "127.0.0.1", OpWrite, ResTopic); got != tc.want {
				t.Errorf("AuthorizeAny = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFilterMatches(t *testing.T) {
	str := func(s string) *string { return &s }
	bindings := []string{
		"TOPIC:LITERAL:orders ALLOW User:alice@* READ",
		"TOPIC:LITERAL:* ALLOW User:bob@* WRITE",
		"TOPIC:PREFIXED:ord DENY User:alice@10.0.0.1 WRITE",
		"TOPIC:PREFIXED:pay ALLOW User:alice@* READ",
		"GROUP:LITERAL:orders ALLOW User:alice@* READ",
	}
	cases := []struct {
		name string
		f    Filter
		want []int // indexes of bindings matched
	}{
		{"everything", Filter{ResourceType: ResAny, PatternType: PatAny, Operation: OpAny, Permission: PermAny}, []int{0, 1, 2, 3, 4}},
		{"topics", Filter{ResourceType: ResTopic, PatternType: PatAny, Operation: OpAny, Permission: PermAny}, []int{0, 1, 2, 3}},
		{"any pattern by name", Filter{ResourceType: ResAny, ResourceName: str("orders"), PatternType: PatAny, Operation: OpAny, Permission: PermAny}, []int{0, 4}},
		{"literal only", Filter{ResourceType: ResTopic, PatternType: PatLiteral, Operation: OpAny, Permission: PermAny}, []int{0, 1}},
		{"prefixed by name", Filter{ResourceType: ResTopic, ResourceName: str("ord"), PatternType: PatPrefixed, Operation: OpAny, Permission: PermAny}, []int{2}},
		{"match", Filter{ResourceType: ResTopic, ResourceName: str("orders"), PatternType: PatMatch, Operation: OpAny, Permission: PermAny}, []int{0, 1, 2}},
		{"match without name", Filter{ResourceType: ResTopic, PatternType: PatMatch, Operation: OpAny, Permission: PermAny}, []int{0, 1, 2, 3}},
		{"principal", Filter{ResourceType: ResAny, PatternType: PatAny, Principal: str("User:bob"), Operation: OpAny, Permission: PermAny}, []int{1}},
		{"host", Filter{ResourceType: ResAny, PatternType: PatAny, Host: str("10.0.0.1"), Operation: OpAny, Permission: PermAny}, []int{2}},
		{"operation", Filter{ResourceType: ResAny, PatternType: PatAny, Operation: OpWrite, Permission: PermAny}, []int{1, 2}},
		{"permission", Filter{ResourceType: ResAny, PatternType: PatAny, Operation: OpAny, Permission: PermDeny}, []int{2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			for i, s := range bindings {
				if tc.f.Matches(acl(t, s)) {
					got = append(got, i)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("matched %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := ACL{ResourceType: ResTopic, ResourceName: "t", PatternType: PatLiteral, Principal: "User:a", Host: "*", Operation: OpRead, Permission: PermAllow}
	if err := ValidateACL(ok); err != nil {
		t.Fatalf("valid acl refused: %v", err)
	}
	bad := map[string]func(*ACL){
		"resource ANY":     func(a *ACL) { a.ResourceType = ResAny },
		"resource unknown": func(a *ACL) { a.ResourceType = 9 },
		"pattern MATCH":    func(a *ACL) { a.PatternType = PatMatch },
		"pattern ANY":      func(a *ACL) { a.PatternType = PatAny },
		"operation ANY":    func(a *ACL) { a.Operation = OpAny },
		"operation 0":      func(a *ACL) { a.Operation = OpUnknown },
		"operation 99":     func(a *ACL) { a.Operation = 99 },
		"permission ANY":   func(a *ACL) { a.Permission = PermAny },
		"empty name":       func(a *ACL) { a.ResourceName = "" },
		"cluster name":     func(a *ACL) { a.ResourceType = ResCluster; a.ResourceName = "c" },
		"principal":        func(a *ACL) { a.Principal = "alice" },
		"empty host":       func(a *ACL) { a.Host = "" },
	}
	for name, mut := range bad {
		a := ok
		mut(&a)
		err := ValidateACL(a)
		if _, isV := err.(*ValidationError); !isV {
			t.Errorf("%s: err = %v, want a ValidationError", name, err)
		}
	}
	f := Filter{ResourceType: ResAny, PatternType: PatAny, Operation: OpAny, Permission: PermAny}
	if err := ValidateFilter(f); err != nil {
		t.Fatalf("valid filter refused: %v", err)
	}
	for name, mut := range map[string]func(*Filter){
		"resource": func(f *Filter) { f.ResourceType = ResUnknown },
		"pattern":  func(f *Filter) { f.PatternType = 7 },
		"op":       func(f *Filter) { f.Operation = OpUnknown },
		"perm":     func(f *Filter) { f.Permission = PermUnknown },
	} {
		g := f
		mut(&g)
		if ValidateFilter(g) == nil {
			t.Errorf("%s: filter accepted", name)
		}
	}
}

func TestConfig(t *testing.T) {
	if on, err := CheckClassName(""); on || err != nil {
		t.Errorf("empty: %v %v", on, err)
	}
	if on, err := CheckClassName(StandardAuthorizerClass); !on || err != nil {
		t.Errorf("standard: %v %v", on, err)
	}
	for _, n := range []string{"kafka.security.authorizer.AclAuthorizer", "com.example.Mine"} {
		if _, err := CheckClassName(n); err == nil {
			t.Errorf("%s accepted", n)
		}
	}
	su, err := ParseSuperUsers(" User:a; User:b ;;")
	if err != nil || len(su) != 2 || su[0] != "User:a" || su[1] != "User:b" {
		t.Errorf("ParseSuperUsers = %v, %v", su, err)
	}
	if _, err := ParseSuperUsers("alice"); err == nil {
		t.Error("super.users without a type accepted")
	}
}
