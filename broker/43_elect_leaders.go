package broker

// ElectLeaders (key 43), versions 0 through kmsg's newest (2).
//
// Behaviour: forwarded to the controller (metadata.PlanElectLeaders, as
// Kafka's ReplicationControlManager.electLeaders decides it). v0 has no
// ElectionType and is PREFERRED; v1+ PREFERRED (0) or UNCLEAN (1), any
// other type INVALID_REQUEST for the whole request. Per partition:
// ELECTION_NOT_NEEDED (PREFERRED: the preferred replica leads; UNCLEAN:
// the partition has a leader), PREFERRED_LEADER_NOT_AVAILABLE (the
// preferred replica is not in the ISR, or is fenced or in controlled
// shutdown), ELIGIBLE_LEADERS_NOT_AVAILABLE (UNCLEAN: no live replica),
// UNKNOWN_TOPIC_OR_PARTITION, each with a message; none on success. UNCLEAN
// elects an ISR or ELR member if one can lead, else any live replica,
// whatever the topic's unclean.leader.election.enable, and that leader
// starts RECOVERING (KIP-704). Null Topics is every partition of every
// topic, with the ELECTION_NOT_NEEDED ones left out of the answer (every
// topic listed). The response comes once the controller has committed the
// elections; brokers, this one included, learn of them through their
// metadata stream, as in Kafka. A controller that cannot be reached
// within TimeoutMillis answers every partition with the error (and the
// top-level ErrorCode, v1+).
//
// Large requests: the controller plans and commits the elections in
// steps of at most 1000 partitions (metadata.ElectLeadersPlan), each its
// own metadata entry with other controller requests free to run between
// them, and answers once the last is applied; as Kafka's, the result is
// not atomic (Kafka writes it in batches).
//
// Differences from Kafka: no authorizer (CLUSTER_AUTHORIZATION_FAILED is
// never returned); no cap on the elections of one request (Kafka fails a
// request of more than 10000 records, KAFKA-14996).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(43, 0, handleElectLeaders) }

func handleElectLeaders(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ElectLeadersRequest)
	resp := kmsg.NewPtrElectLeadersResponse()
	typ := metadata.ElectPreferred
	if req.Version >= 1 {
		typ = metadata.ElectionType(req.ElectionType)
	}
	mreq := metadata.ElectLeadersRequest{Type: typ}
	if req.Topics != nil {
		mreq.Topics = make([]metadata.ElectLeadersTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			mreq.Topics = append(mreq.Topics, metadata.ElectLeadersTopic{Name: t.Topic, Partitions: t.Partitions})
		}
	}
	// failAll answers every requested partition with err.
	failAll := func(err error) *frame {
		if req.Version >= 1 {
			resp.ErrorCode = errCode(err)
		}
		for _, t := range req.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, errCode(err), kmsg.StringPtr(err.Error())
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return encodeResponse(r, resp)
	}
	if typ != metadata.ElectPreferred && typ != metadata.ElectUnclean {
		return failAll(fmt.Errorf("%w: unknown election type %d", kerr.InvalidRequest, req.ElectionType)), nil
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout(req.TimeoutMillis))
	defer cancel()
	results, err := n.svc.ElectLeaders(cctx, mreq)
	if err == nil && req.Topics != nil && len(results) != len(req.Topics) {
		err = errResultCount
	}
	if err != nil {
		return failAll(err), nil
	}
	for _, res := range results {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = res.Topic
		rt.Partitions = make([]kmsg.ElectLeadersResponseTopicPartition, 0, len(res.Partitions))
		for _, p := range res.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = p.Partition
			if p.Err != nil {
				rp.ErrorCode, rp.ErrorMessage = metadata.ErrorCode(p.Err), kmsg.StringPtr(p.Err.Error())
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return encodeResponse(r, resp), nil
}
