package broker

// AlterPartitionReassignments (key 45), versions 0 through kmsg's newest.
//
// Behaviour (KIP-455): each partition's target replicas go to the
// controller (metadata.State.PlanReassignments): the replicas become the
// target plus the original ones, the added replicas create their logs and
// follow the leader, and once all of them are in the ISR the controller
// drops the removed ones (and moves the leadership off a removed leader);
// the removed replicas then stop and delete their logs (reconcile.go).
// Null replicas cancel the reassignment in progress; a new one replaces
// it. Errors per partition, with a message: UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_REPLICA_ASSIGNMENT (empty, a repeated broker, a broker not
// registered or fenced, a cancel needing an unclean election),
// NO_REASSIGNMENT_IN_PROGRESS (a cancel without one), and from v1
// INVALID_REPLICATION_FACTOR when AllowReplicationFactorChange is false
// and the target's size is not the original replica count (KIP-860).
//
// Differences from Kafka: none known. The copy is throttled only as the
// topic's *.replication.throttled.replicas configs say (replica_throttle.go),
// which this API does not set (Kafka's reassign tool sets them).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(45, 0, handleAlterPartitionReassignments) }

func handleAlterPartitionReassignments(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	keepRF := r.version >= 1 && !req.AllowReplicationFactorChange
	var mreq []metadata.ReassignmentRequest
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
			mreq = append(mreq, metadata.ReassignmentRequest{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas, KeepReplicationFactor: keepRF})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(mreq) == 0 {
		return encodeResponse(r, resp), nil
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout(req.TimeoutMillis))
	defer cancel()
	results, err := n.svc.AlterPartitionReassignments(cctx, mreq)
	if err == nil && len(results) != len(mreq) {
		err = errResultCount
	}
	if err != nil {
		// The request as a whole failed (no controller, timeout): Kafka
		// answers it with the top-level error.
		resp.ErrorCode, resp.ErrorMessage = errCode(err), kmsg.StringPtr(err.Error())
		return encodeResponse(r, resp), nil
	}
	i := 0
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			if e := results[i].Err; e != nil {
				rp := &resp.Topics[ti].Partitions[pi]
				rp.ErrorCode, rp.ErrorMessage = metadata.ErrorCode(e), kmsg.StringPtr(e.Error())
			}
			i++
		}
	}
	return encodeResponse(r, resp), nil
}
