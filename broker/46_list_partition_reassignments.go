package broker

// ListPartitionReassignments (key 46), versions 0 through kmsg's newest.
//
// Behaviour (KIP-455): the reassignments in progress, as the controller
// leader has them (forwarded like the admin RPCs that change metadata, so
// the answer reflects every reassignment the controller accepted): of the
// named partitions (unknown topics and partitions without a reassignment
// are left out, as Kafka's controller does), or of every partition for
// null topics. Each shows the union replica set, the adding and the
// removing replicas. A failed call answers with the top-level error.
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(46, 0, handleListPartitionReassignments) }

func handleListPartitionReassignments(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ListPartitionReassignmentsRequest)
	resp := kmsg.NewPtrListPartitionReassignmentsResponse()
	var mreq metadata.ListReassignmentsRequest
	if req.Topics != nil {
		mreq.Topics = []metadata.ListReassignmentsTopic{}
		for _, t := range req.Topics {
			mreq.Topics = append(mreq.Topics, metadata.ListReassignmentsTopic{Name: t.Topic, Partitions: t.Partitions})
		}
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout(req.TimeoutMillis))
	defer cancel()
	ongoing, err := n.svc.ListPartitionReassignments(cctx, mreq)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err), kmsg.StringPtr(err.Error())
		return encodeResponse(r, resp), nil
	}
	for _, o := range ongoing {
		if len(resp.Topics) == 0 || resp.Topics[len(resp.Topics)-1].Topic != o.Topic {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = o.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition, rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = o.Partition, o.Replicas, o.AddingReplicas, o.RemovingReplicas
		if rp.AddingReplicas == nil {
			rp.AddingReplicas = []int32{}
		}
		if rp.RemovingReplicas == nil {
			rp.RemovingReplicas = []int32{}
		}
		rt := &resp.Topics[len(resp.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return encodeResponse(r, resp), nil
}
