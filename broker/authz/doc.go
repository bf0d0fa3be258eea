// Package authz is Strata's authorizer: Kafka's ACL model (resource types,
// pattern types, operations, permissions, with kmsg's numbers) and the
// decision of Kafka's StandardAuthorizer as pure functions over a set of
// ACLs. It owns no I/O and no locking: the broker keeps the ACLs in the
// controller's metadata image, builds an [Authorizer] from them when the
// image changes, and asks it per request.
//
// The decision, as StandardAuthorizerData does it:
//
//  1. a principal named in super.users is allowed everything;
//  2. any ACL matching the request (resource pattern, principal or User:*,
//     host or *, operation or ALL) with DENY denies;
//  3. else any such ACL with ALLOW allows; an ALLOW of READ, WRITE, DELETE
//     or ALTER also allows DESCRIBE, one of ALTER_CONFIGS also allows
//     DESCRIBE_CONFIGS (a DENY implies nothing);
//  4. else, if no ACL at all names the resource (literal, prefixed or the
//     literal wildcard "*", for any principal), allow.everyone.if.no.acl.found
//     decides (default false); otherwise deny.
//
// Example:
//
//	a := authz.New(authz.Config{SuperUsers: []string{"User:admin"}}, acls)
//	if !a.Authorize("User:alice", "127.0.0.1", authz.OpRead, authz.ResTopic, "orders") { ... }
package authz
