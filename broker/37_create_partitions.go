package broker

// CreatePartitions (key 37), versions 0 through kmsg's newest (3).
//
// Behaviour: each topic grows to Count partitions through the controller
// (metadata.PlanCreatePartitions: placement as for new topics, the
// replication factor of the first partition not being reassigned, or the
// given Assignment, one replica list per new partition). Errors per topic, with a message:
// INVALID_PARTITIONS (Count not above the current count),
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (topic repeated),
// INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT,
// REASSIGNMENT_IN_PROGRESS (every partition is being reassigned: no
// replication factor to take, as Kafka); POLICY_VIOLATION
// for topics that would take the request past 10000 new partitions (Kafka's
// per-operation record cap) or past this broker's open-file budget
// (fdbudget.go; nothing is created). ValidateOnly
// plans without committing. On success the handler waits, within the
// request's timeout, until this broker's metadata view has the new
// partitions and their logs are open, so a producer that refreshes its
// metadata right after can write to them.
//
// Differences from Kafka: a timeout of 0 does not skip the wait for the
// controller (the controller always answers first).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(37, 0, handleCreatePartitions) }

// maxNewPartitionsPerRequest caps the partitions one request may add, as
// Kafka's controller caps the records of one operation (10000).
const maxNewPartitionsPerRequest = 10000

func handleCreatePartitions(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.CreatePartitionsRequest)
	resp := kmsg.NewPtrCreatePartitionsResponse()
	mreq := metadata.CreatePartitionsRequest{ValidateOnly: req.ValidateOnly}
	// Kafka's controller refuses a request adding more than
	// maxNewPartitionsPerRequest partitions (its MAX_RECORDS_PER_USER_OP):
	// a fuzzed Count of 2^31 must not make the controller plan billions.
	var current map[string]int32
	rfs := map[string]int16{} // replication factor of partition 0, for the budget
	n.view(func(st *metadata.State) {
		current = make(map[string]int32, len(req.Topics))
		for _, t := range req.Topics {
			if ti, ok := st.TopicByName(t.Topic); ok {
				current[t.Topic] = ti.NumPartitions
				if ps := st.Partitions(ti.ID); len(ps) > 0 {
					rfs[t.Topic] = int16(len(ps[0].Replicas))
				}
			}
		}
	})
	refused := make([]error, len(req.Topics))
	added := int64(0)
	az := n.authorizer() // authorize.go: ALTER on the topic
	for i, t := range req.Topics {
		if !r.allowed(az, authz.OpAlter, authz.ResTopic, t.Topic) {
			refused[i] = kerr.TopicAuthorizationFailed
			continue
		}
		if cur, ok := current[t.Topic]; ok && t.Count > cur {
			added += int64(t.Count - cur)
			if added > maxNewPartitionsPerRequest {
				refused[i] = fmt.Errorf("%w: excessively large number of partitions per request (more than %d new)", kerr.PolicyViolation, maxNewPartitionsPerRequest)
				added -= int64(t.Count - cur)
			}
		}
	}
	// The open-file budget (fdbudget.go): growth that would not fit on
	// this broker is refused here and never reaches the controller.
	// controller_mutation_rate (quotas.go): the partitions added.
	mq := n.mutationQuota(r, r.version >= 3)
	if req.ValidateOnly {
		mq = nil
	}
	taken := make([]int64, len(req.Topics))
	for i, t := range req.Topics {
		cur, ok := current[t.Topic]
		if refused[i] != nil || !ok || t.Count <= cur {
			continue
		}
		if err := mq.take(int64(t.Count - cur)); err != nil {
			refused[i] = err
			continue
		}
		taken[i] = int64(t.Count - cur)
		var assignments [][]int32
		for _, a := range t.Assignment {
			assignments = append(assignments, a.Replicas)
		}
		release, err := n.reservePartitions(n.onThisNode(int64(t.Count-cur), rfs[t.Topic], assignments))
		if err != nil {
			mq.giveBack(taken[i])
			refused[i] = err
			continue
		}
		defer release() // after waitMetadata: the new logs are open and counted by then
	}
	var sent []int // mreq.Topics[j] is req.Topics[sent[j]]
	for i, t := range req.Topics {
		if refused[i] != nil {
			continue
		}
		sent = append(sent, i)
		ct := metadata.CreatePartitionsTopic{Name: t.Topic, Count: t.Count}
		if t.Assignment != nil {
			ct.Assignments = make([][]int32, 0, len(t.Assignment))
			for _, a := range t.Assignment {
				ct.Assignments = append(ct.Assignments, a.Replicas)
			}
		}
		mreq.Topics = append(mreq.Topics, ct)
	}
	for i, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		if refused[i] != nil {
			rt.ErrorCode, rt.ErrorMessage = errCode(refused[i]), kmsg.StringPtr(refused[i].Error())
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(mreq.Topics) == 0 {
		mq.done()
		return encodeResponse(r, resp), nil
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout(req.TimeoutMillis))
	defer cancel()
	results, err := n.svc.CreatePartitions(cctx, mreq)
	if err == nil && len(results) != len(mreq.Topics) {
		err = errResultCount
	}
	if err != nil {
		for _, i := range sent {
			mq.giveBack(taken[i])
			resp.Topics[i].ErrorCode, resp.Topics[i].ErrorMessage = errCode(err), kmsg.StringPtr(err.Error())
		}
		mq.done()
		return encodeResponse(r, resp), nil
	}
	grown := map[string]int32{}
	for j, res := range results {
		rt := &resp.Topics[sent[j]]
		if res.Err != nil {
			mq.giveBack(taken[sent[j]])
			rt.ErrorCode, rt.ErrorMessage = metadata.ErrorCode(res.Err), kmsg.StringPtr(res.Err.Error())
		} else if !req.ValidateOnly {
			grown[res.Name] = mreq.Topics[j].Count
		}
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
	mq.done()
	return encodeResponse(r, resp), nil
}
