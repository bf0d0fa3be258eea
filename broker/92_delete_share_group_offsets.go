package broker

// DeleteShareGroupOffsets (key 92), version 0 (kmsg's newest).
//
// Behaviour: answered by the group's coordinator (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE as the
// top-level error otherwise); DELETE on the group, else
// GROUP_AUTHORIZATION_FAILED; a share group with members is
// NON_EMPTY_GROUP; a classic or consumer group of that id is
// GROUP_ID_NOT_FOUND; GROUP_ID_NOT_FOUND for a group that is neither a known
// share group nor has share state for any requested topic. Per topic:
// READ on it, else TOPIC_AUTHORIZATION_FAILED; a topic the metadata does
// not have is UNKNOWN_TOPIC_OR_PARTITION; otherwise the share state of
// each of its partitions is deleted (DeleteShareGroupState through the
// node's persister; a partition with none is a no-op), and the topic's
// error is the first partition's failure.
//
// Differences from Kafka: the group's list of initialized topics is not
// updated here (the membership slice owns it); a group the coordinator
// does not know but that has share state (left by AlterShareGroupOffsets)
// is treated as an empty share group.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/share"
)

const deleteShareGroupOffsetsKey = 92

func init() { register(deleteShareGroupOffsetsKey, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := kmsg.NewPtrDeleteShareGroupOffsetsResponse()
	az := n.authorizer()
	fail := func(err error) (*frame, error) {
		resp.ErrorCode, resp.ErrorMessage = shareStateErr(err)
		return encodeResponse(r, resp), nil
	}
	exists, err := n.shareOffsetsGroupCheck(r, az, authz.OpDelete, req.GroupID)
	if err != nil {
		return fail(err)
	}
	type planned struct {
		out   kmsg.DeleteShareGroupOffsetsResponseTopic
		topic shareTopic
		ok    bool
	}
	var plan []planned
	hasState := false
	for _, rt := range req.Topics {
		p := planned{out: kmsg.NewDeleteShareGroupOffsetsResponseTopic()}
		p.out.Topic = rt.Topic
		t, known := n.shareTopicByName(rt.Topic)
		switch {
		case !r.allowed(az, authz.OpRead, authz.ResTopic, rt.Topic):
			p.out.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case !known:
			p.out.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			p.out.TopicID, p.topic, p.ok = t.id, t, true
			if !exists && !hasState {
				for i := int32(0); i < t.partitions && !hasState; i++ {
					_, err := n.sharePersister.Summary(ctx, share.Key{Group: req.GroupID, TopicID: t.id, Partition: i})
					hasState = !errors.Is(err, share.ErrNoState)
				}
			}
		}
		plan = append(plan, p)
	}
	if !exists && !hasState {
		return fail(kerr.GroupIDNotFound)
	}
	for _, p := range plan {
		if p.ok {
			for i := int32(0); i < p.topic.partitions; i++ {
				if err := n.sharePersister.Delete(ctx, share.Key{Group: req.GroupID, TopicID: p.topic.id, Partition: i}); err != nil && p.out.ErrorCode == 0 {
					p.out.ErrorCode, p.out.ErrorMessage = shareStateErr(err)
				}
			}
		}
		resp.Topics = append(resp.Topics, p.out)
	}
	return encodeResponse(r, resp), nil
}
