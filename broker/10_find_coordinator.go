package broker

// FindCoordinator (key 10), versions 0 through kmsg's newest (6).
//
// Behaviour: v0-v3 look up one key, v4+ a batch (CoordinatorKeys, one
// answer each). Key type 0 (GROUP) is answered with the broker leading
// __consumer_offsets partition PartitionFor(group) (Kafka's hash), on the
// listener the request came in on. The first lookup creates
// __consumer_offsets if it does not exist yet (as Kafka does; nothing
// creates it earlier), answering COORDINATOR_NOT_AVAILABLE until its
// partitions are led. A group whose partition has no leader, or whose
// leader has no listener, gets COORDINATOR_NOT_AVAILABLE. An empty group id
// gets INVALID_REQUEST (v4+ per key), as Kafka.
//
// Key type 1 (TRANSACTION) is answered the same way with the leader of
// __transaction_state partition PartitionFor(transactional id), the first
// lookup creating that topic (txn_coordinator.go).
//
// Key type 2 (SHARE, v6+ only; INVALID_REQUEST below) needs CLUSTER_ACTION
// on the cluster (CLUSTER_AUTHORIZATION_FAILED) and a key
// "group:topicId:partition" (INVALID_REQUEST otherwise); it is answered
// with the leader of __share_group_state partition
// abs(javaHash(key)) % partitions (share_coordinator.go), the first lookup
// creating that topic.
//
// Differences from Kafka: other key types get INVALID_REQUEST.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(10, 0, handleFindCoordinator) }

// findCoordinatorCreateWait bounds how long a FindCoordinator waits for
// __consumer_offsets to be created before answering
// COORDINATOR_NOT_AVAILABLE (the client retries).
const findCoordinatorCreateWait = 2 * time.Second

type coordinatorAnswer struct {
	node int32
	host string
	port int32
	err  error
}

func handleFindCoordinator(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.FindCoordinatorRequest)
	resp := kmsg.NewPtrFindCoordinatorResponse()
	keys := req.CoordinatorKeys
	if r.version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	if req.CoordinatorType == 0 && n.groups.numPartitions() == 0 {
		cctx, cancel := context.WithTimeout(ctx, findCoordinatorCreateWait)
		if err := n.groups.ensureOffsetsTopic(cctx); err != nil {
			n.logger.Debug("broker: create "+offsetsTopic+" on FindCoordinator", "err", err)
		}
		cancel()
	}
	if req.CoordinatorType == 1 && n.txns.numPartitions() == 0 {
		cctx, cancel := context.WithTimeout(ctx, findCoordinatorCreateWait)
		if err := n.txns.ensureTopic(cctx); err != nil {
			n.logger.Debug("broker: create "+txnStateTopic+" on FindCoordinator", "err", err)
		}
		cancel()
	}
	if req.CoordinatorType == 2 && r.version >= 6 && n.shares.numPartitions() == 0 {
		cctx, cancel := context.WithTimeout(ctx, findCoordinatorCreateWait)
		if err := n.shares.ensureTopic(cctx); err != nil {
			n.logger.Debug("broker: create "+shareStateTopic+" on FindCoordinator", "err", err)
		}
		cancel()
	}
	az := n.authorizer() // authorize.go: DESCRIBE on the group or transactional id
	for _, key := range keys {
		var a coordinatorAnswer
		switch {
		case req.CoordinatorType == 0 && !r.allowed(az, authz.OpDescribe, authz.ResGroup, key):
			a = coordinatorAnswer{node: -1, port: -1, err: kerr.GroupAuthorizationFailed}
		case req.CoordinatorType == 1 && !r.allowed(az, authz.OpDescribe, authz.ResTransactionalID, key):
			a = coordinatorAnswer{node: -1, port: -1, err: kerr.TransactionalIDAuthorizationFailed}
		case req.CoordinatorType == 2 && r.version < 6:
			a = coordinatorAnswer{node: -1, port: -1, err: kerr.InvalidRequest}
		case req.CoordinatorType == 2 && !r.allowedCluster(az, authz.OpClusterAction):
			a = coordinatorAnswer{node: -1, port: -1, err: kerr.ClusterAuthorizationFailed}
		default:
			a = n.findCoordinator(req.CoordinatorType, key, r.conn.listener)
		}
		if r.version < 4 {
			resp.NodeID, resp.Host, resp.Port = a.node, a.host, a.port
			resp.ErrorCode = errCode(a.err)
			if a.err != nil && r.version >= 1 {
				resp.ErrorMessage = kmsg.StringPtr(a.err.Error())
			}
			break
		}
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = key, a.node, a.host, a.port
		c.ErrorCode = errCode(a.err)
		if a.err != nil {
			c.ErrorMessage = kmsg.StringPtr(a.err.Error())
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return encodeResponse(r, resp), nil
}

// findCoordinator answers one key: the leader of its __consumer_offsets
// partition, or the error (node -1, empty host, port -1 as Kafka).
func (n *Node) findCoordinator(keyType int8, key, listener string) coordinatorAnswer {
	a := coordinatorAnswer{node: -1, port: -1}
	switch {
	case keyType == 1:
		return n.findTxnCoordinator(key, listener)
	case keyType == 2:
		return n.findShareCoordinator(key, listener)
	case keyType != 0, key == "":
		a.err = kerr.InvalidRequest
		return a
	}
	a.err = kerr.CoordinatorNotAvailable
	n.view(func(st *metadata.State) {
		t, ok := st.TopicByName(offsetsTopic)
		if !ok {
			return
		}
		parts := st.Partitions(t.ID)
		if len(parts) == 0 {
			return
		}
		p, ok := st.Partition(t.ID, group.PartitionFor(key, int32(len(parts))))
		if ok {
			a = n.coordinatorOn(st, p, listener, a)
		}
	})
	return a
}

// coordinatorOn answers a FindCoordinator key whose state partition is p
// (of __consumer_offsets, __transaction_state or __share_group_state):
// p's leader on listener, or none (els) when p has no leader, its leader
// is fenced or lacks the listener, or it is this broker presumed fenced
// (node.go). It runs inside n.view.
func (n *Node) coordinatorOn(st *metadata.State, p metadata.PartitionInfo, listener string, none coordinatorAnswer) coordinatorAnswer {
	if p.Leader == metadata.NoLeader || (p.Leader == n.cfg.NodeID && n.presumedFenced()) {
		return none
	}
	b, ok := st.Broker(p.Leader)
	if !ok || b.Fenced {
		return none
	}
	if l, ok := pickListener(b.Listeners, listener); ok {
		return coordinatorAnswer{node: b.ID, host: l.Host, port: l.Port}
	}
	return none
}
