package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
)

// authzOn is the config turning Kafka's StandardAuthorizer on.
func authzOn(extra map[string]string) map[string]string {
	m := map[string]string{"authorizer.class.name": authz.StandardAuthorizerClass}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// TestACLAPIsSecurityDisabled: without an authorizer the three ACL APIs
// answer SECURITY_DISABLED, as Kafka's AclApis.
func TestACLAPIsSecurityDisabled(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	b := kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	created, err := adm.CreateACLs(ctx, b)
	if err != nil || len(created) != 1 || !errors.Is(created[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("CreateACLs: %v %+v, want SECURITY_DISABLED", err, created)
	}
	f := kadm.NewACLs().Allow().AllowHosts().Topics().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	desc, err := adm.DescribeACLs(ctx, f)
	if err != nil || len(desc) != 1 || !errors.Is(desc[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DescribeACLs: %v %+v, want SECURITY_DISABLED", err, desc)
	}
	del, err := adm.DeleteACLs(ctx, f)
	if err != nil || len(del) != 1 || !errors.Is(del[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DeleteACLs: %v %+v, want SECURITY_DISABLED", err, del)
	}
}

// TestACLAPIsRoundTrip: CreateAcls, DescribeAcls and DeleteAcls through
// kadm against a node with the authorizer on (the test's client, an
// anonymous connection, is a super user); each change is enforced by the
// answering broker when its answer arrives (read-your-writes).
func TestACLAPIsRoundTrip(t *testing.T) {
	n := startNode(t, t.TempDir(), authzOn(map[string]string{"super.users": "User:ANONYMOUS"}))
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	alice := func() bool {
		return n.authorizer().Authorize("User:alice", "127.0.0.1", authz.OpRead, authz.ResTopic, "orders")
	}
	if alice() {
		t.Fatal("alice may read before any ACL")
	}
	b := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").Groups("g").
		Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	created, err := adm.CreateACLs(ctx, b)
	if err != nil || len(created) != 2 {
		t.Fatalf("CreateACLs: %v %+v", err, created)
	}
	for _, c := range created {
		if c.Err != nil {
			t.Fatalf("CreateACLs %s: %v", c.Name, c.Err)
		}
	}
	if !alice() {
		t.Fatal("CreateAcls answered before the broker enforces the ACL")
	}
	deny := kadm.NewACLs().Deny("User:*").DenyHosts("10.0.0.1").Topics("ord").
		Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed)
	if res, err := adm.CreateACLs(ctx, deny); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs deny: %v %+v", err, res)
	}

	// Kafka's validation, per creation: a CLUSTER resource not named
	// kafka-cluster, a MATCH pattern, an ANY operation.
	cl := newClient(t, n)
	creq := kmsg.NewPtrCreateACLsRequest()
	for _, c := range []struct {
		rt   kmsg.ACLResourceType
		name string
		pt   kmsg.ACLResourcePatternType
		op   kmsg.ACLOperation
	}{
		{kmsg.ACLResourceTypeCluster, "other", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationAlter},
		{kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeMatch, kmsg.ACLOperationRead},
		{kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationAny},
	} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = c.rt, c.name, c.pt
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:x", "*", c.op, kmsg.ACLPermissionTypeAllow
		creq.Creations = append(creq.Creations, cr)
	}
	cresp, err := creq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range cresp.Results {
		if r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("creation %d: code %d, want INVALID_REQUEST", i, r.ErrorCode)
		}
	}

	// Describe with MATCH: the literal ACL of "orders" and the prefixed
	// DENY of "ord"; not the group's.
	match := kadm.NewACLs().Allow().AllowHosts().Deny().DenyHosts().Topics("orders").Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch)
	desc, err := adm.DescribeACLs(ctx, match)
	if err != nil || len(desc) != 1 || desc[0].Err != nil {
		t.Fatalf("DescribeACLs: %v %+v", err, desc)
	}
	got := map[string]bool{}
	for _, d := range desc[0].Described {
		got[d.Name+"/"+d.Pattern.String()+"/"+d.Principal+"/"+d.Operation.String()+"/"+d.Permission.String()] = true
	}
	want := map[string]bool{"orders/LITERAL/User:alice/READ/ALLOW": true, "ord/PREFIXED/User:*/WRITE/DENY": true}
	if len(got) != len(want) {
		t.Fatalf("described %v, want %v", got, want)
	}
	for k := range want {
		if !got[k] {
			t.Fatalf("described %v, want %v", got, want)
		}
	}
	// An unknown filter part is INVALID_REQUEST.
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeAny
	dreq.Operation, dreq.PermissionType = kmsg.ACLOperationUnknown, kmsg.ACLPermissionTypeAny
	if dresp, err := dreq.RequestWith(ctx, cl); err != nil || dresp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("DescribeACLs with an UNKNOWN operation: %v %+v", err, dresp)
	}

	// Delete every ALLOW of topics: alice loses READ at once.
	del := kadm.NewACLs().Allow().AllowHosts().Topics().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	dres, err := adm.DeleteACLs(ctx, del)
	if err != nil || len(dres) != 1 || dres[0].Err != nil || len(dres[0].Deleted) != 1 || dres[0].Deleted[0].Name != "orders" {
		t.Fatalf("DeleteACLs: %v %+v", err, dres)
	}
	if alice() {
		t.Fatal("DeleteAcls answered before the broker stopped enforcing the ACL")
	}
	all := kadm.NewACLs().Allow().AllowHosts().Deny().DenyHosts().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	desc, err = adm.DescribeACLs(ctx, all)
	if err != nil || len(desc) != 1 || len(desc[0].Described) != 2 {
		t.Fatalf("DescribeACLs after delete: %v %+v, want the group's and the deny", err, desc)
	}
}

// TestACLAPIsNeedClusterRights: CreateAcls and DeleteAcls need ALTER on
// the cluster, DescribeAcls DESCRIBE: once the cluster has an ACL not
// naming the anonymous client, it gets CLUSTER_AUTHORIZATION_FAILED.
func TestACLAPIsNeedClusterRights(t *testing.T) {
	n := startNode(t, t.TempDir(), authzOn(map[string]string{"allow.everyone.if.no.acl.found": "true"}))
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	b := kadm.NewACLs().Allow("User:admin").Clusters().Operations(kadm.OpAlter).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctx, b); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs with no ACL on the cluster yet: %v %+v", err, res)
	}
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:me").Topics("t").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("CreateACLs: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, res)
	}
	f := kadm.NewACLs().Allow().AllowHosts().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	if d, err := adm.DescribeACLs(ctx, f); err != nil || !errors.Is(d[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("DescribeACLs: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, d)
	}
	if d, err := adm.DeleteACLs(ctx, f); err != nil || !errors.Is(d[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("DeleteACLs: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, d)
	}
}
