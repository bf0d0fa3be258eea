package broker

// CreatePartitions (key 37), versions 0 through kmsg's newest (3).
//
// Behaviour: each topic grows to Count partitions through the controller
// (metadata.PlanCreatePartitions: placement as for new topics, the
// replication factor of partition 0, or the given Assignment, one replica
// list per new partition). Errors per topic, with a message:
// INVALID_PARTITIONS (Count not above the current count),
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (topic repeated),
// INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT. ValidateOnly
// plans without committing. On success the handler waits, within the
// request's timeout, until this broker's metadata view has the new
// partitions and their logs are open, so a producer that refreshes its
// metadata right after can write to them.
//
// Differences from Kafka: a timeout of 0 does not skip the wait for the
// controller (the controller always answers first).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(37, 0, false, handleCreatePartitions) }

func handleCreatePartitions(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.CreatePartitionsRequest)
	resp := kmsg.NewPtrCreatePartitionsResponse()
	mreq := metadata.CreatePartitionsRequest{ValidateOnly: req.ValidateOnly}
	for _, t := range req.Topics {
		ct := metadata.CreatePartitionsTopic{Name: t.Topic, Count: t.Count}
		if t.Assignment != nil {
			ct.Assignments = make([][]int32, 0, len(t.Assignment))
			for _, a := range t.Assignment {
				ct.Assignments = append(ct.Assignments, a.Replicas)
			}
		}
		mreq.Topics = append(mreq.Topics, ct)
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout(req.TimeoutMillis))
	defer cancel()
	results, err := n.svc.CreatePartitions(cctx, mreq)
	if err == nil && len(results) != len(req.Topics) {
		err = errResultCount
	}
	if err != nil {
		for _, t := range req.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, errCode(err), kmsg.StringPtr(err.Error())
			resp.Topics = append(resp.Topics, rt)
		}
		return encodeResponse(r, resp), nil
	}
	grown := map[string]int32{}
	for i, res := range results {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = res.Name
		if res.Err != nil {
			rt.ErrorCode, rt.ErrorMessage = metadata.ErrorCode(res.Err), kmsg.StringPtr(res.Err.Error())
		} else if !req.ValidateOnly {
			grown[res.Name] = req.Topics[i].Count
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(grown) > 0 {
		n.waitMetadata(cctx, func(st *metadata.State) bool {
			for name, count := range grown {
				t, ok := st.TopicByName(name)
				if ok && int32(len(st.Partitions(t.ID))) < count {
					return false // a deleted topic (!ok) is not waited for
				}
			}
			return true
		})
	}
	return encodeResponse(r, resp), nil
}
