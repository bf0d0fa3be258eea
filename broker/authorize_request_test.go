package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
)

// TestRequestRefusal is the whole-request decision of each API against
// Kafka's KafkaApis checks, for a principal with a few ACLs.
func TestRequestRefusal(t *testing.T) {
	var acls []authz.ACL
	for _, s := range []string{
		"GROUP:LITERAL:mine ALLOW User:alice@* READ",
		"TRANSACTIONAL_ID:PREFIXED:tx- ALLOW User:alice@* WRITE",
		"TOPIC:LITERAL:orders ALLOW User:bob@* WRITE",
		"CLUSTER:LITERAL:kafka-cluster ALLOW User:carol@* IDEMPOTENT_WRITE",
		"CLUSTER:LITERAL:kafka-cluster ALLOW User:admin@* ALTER",
	} {
		a, err := authz.ParseACL(s)
		if err != nil {
			t.Fatal(err)
		}
		acls = append(acls, a)
	}
	az := authz.New(authz.Config{SuperUsers: []string{"User:broker"}}, acls)
	str := kmsg.StringPtr
	join := func(g string) kmsg.Request { r := kmsg.NewPtrJoinGroupRequest(); r.Group = g; return r }
	sync := func(g string) kmsg.Request { r := kmsg.NewPtrSyncGroupRequest(); r.Group = g; return r }
	hb := func(g string) kmsg.Request { r := kmsg.NewPtrHeartbeatRequest(); r.Group = g; return r }
	leave := func(g string) kmsg.Request { r := kmsg.NewPtrLeaveGroupRequest(); r.Group = g; return r }
	initPID := func(txn *string) kmsg.Request {
		r := kmsg.NewPtrInitProducerIDRequest()
		r.TransactionalID = txn
		return r
	}
	addOffsets := func(txn, g string) kmsg.Request {
		r := kmsg.NewPtrAddOffsetsToTxnRequest()
		r.TransactionalID, r.Group = txn, g
		return r
	}
	endTxn := func(txn string) kmsg.Request { r := kmsg.NewPtrEndTxnRequest(); r.TransactionalID = txn; return r }
	const (
		ok        = 0
		groupErr  = 30 // GROUP_AUTHORIZATION_FAILED
		txnErr    = 53 // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
		clusterEr = 31 // CLUSTER_AUTHORIZATION_FAILED
	)
	if kerr.GroupAuthorizationFailed.Code != groupErr || kerr.TransactionalIDAuthorizationFailed.Code != txnErr || kerr.ClusterAuthorizationFailed.Code != clusterEr {
		t.Fatal("error codes")
	}
	for _, c := range []struct {
		principal string
		req       kmsg.Request
		want      int16
	}{
		{"User:alice", join("mine"), ok},
		{"User:alice", join("other"), groupErr},
		{"User:bob", join("mine"), groupErr},
		{"User:alice", sync("mine"), ok},
		{"User:alice", sync("x"), groupErr},
		{"User:alice", hb("x"), groupErr},
		{"User:alice", leave("x"), groupErr},
		{"User:alice", leave("mine"), ok},
		{"User:broker", join("x"), ok}, // super user
		{"User:alice", initPID(str("tx-1")), ok},
		{"User:alice", initPID(str("other")), txnErr},
		{"User:alice", initPID(nil), clusterEr}, // idempotent without rights
		{"User:bob", initPID(nil), ok},          // KIP-679: WRITE on a topic
		{"User:carol", initPID(nil), ok},        // IDEMPOTENT_WRITE
		{"User:alice", addOffsets("tx-1", "mine"), ok},
		{"User:alice", addOffsets("tx-1", "other"), groupErr},
		{"User:alice", addOffsets("nope", "mine"), txnErr}, // the txn id first
		{"User:alice", endTxn("tx-9"), ok},
		{"User:bob", endTxn("tx-9"), txnErr},
		{"User:admin", kmsg.NewPtrElectLeadersRequest(), ok},
		{"User:alice", kmsg.NewPtrElectLeadersRequest(), clusterEr},
		{"User:alice", kmsg.NewPtrAlterPartitionAssignmentsRequest(), clusterEr},
		{"User:admin", kmsg.NewPtrAlterPartitionAssignmentsRequest(), ok},
		{"User:admin", kmsg.NewPtrListPartitionReassignmentsRequest(), ok}, // ALTER implies DESCRIBE
		{"User:alice", kmsg.NewPtrListPartitionReassignmentsRequest(), clusterEr},
		{"User:admin", kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(), ok}, // ALTER implies DESCRIBE
		{"User:alice", kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(), clusterEr},
		{"User:alice", kmsg.NewPtrUnregisterBrokerRequest(), clusterEr},
		{"User:alice", kmsg.NewPtrApiVersionsRequest(), ok}, // not a whole-request check
	} {
		if got := requestRefusal(az, who{c.principal, "127.0.0.1"}, c.req); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.principal, kmsg.NameForKey(c.req.Key()), got, c.want)
		}
	}
}
