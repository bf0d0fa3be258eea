package authz

import (
	"fmt"
	"testing"
)

// BenchmarkAuthorize is one decision over 10 000 ACLs (literal ones on
// 5 000 topics, 100 prefixes, a wildcard), as a produce or fetch makes per
// topic with the authorizer on.
func BenchmarkAuthorize(b *testing.B) {
	var acls []ACL
	for i := range 5000 {
		acls = append(acls,
			ACL{ResTopic, fmt.Sprintf("topic-%d", i), PatLiteral, fmt.Sprintf("User:u%d", i%50), "*", OpRead, PermAllow},
			ACL{ResTopic, fmt.Sprintf("topic-%d", i), PatLiteral, "User:writer", "*", OpWrite, PermAllow})
	}
	for i := range 100 {
		acls = append(acls, ACL{ResTopic, fmt.Sprintf("pre-%d-", i), PatPrefixed, "User:u1", "*", OpRead, PermAllow})
	}
	acls = append(acls, ACL{ResTopic, Wildcard, PatLiteral, "User:*", "10.9.9.9", OpAll, PermDeny})
	a := New(Config{}, acls)
	b.ResetTimer()
	for i := range b.N {
		if !a.Authorize("User:writer", "127.0.0.1", OpWrite, ResTopic, fmt.Sprintf("topic-%d", i%5000)) {
			b.Fatal("denied")
		}
	}
}
