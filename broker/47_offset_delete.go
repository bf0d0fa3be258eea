package broker

// OffsetDelete (key 47), version 0 (kmsg's newest).
//
// Behaviour (Kafka's GroupCoordinator.handleDeleteOffsets): the group's
// partition must be led and loaded here (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE at the top). A
// group with neither members nor committed offsets, or Dead, gets
// GROUP_ID_NOT_FOUND. An Empty group (or offsets committed outside any
// group) has the requested offsets deleted. A group with members may only
// lose offsets of topics none of its members subscribes to: it must use
// the consumer protocol, whose subscriptions (ConsumerMemberMetadata) say
// which topics are in use (else NON_EMPTY_GROUP at the top), and partitions
// of subscribed topics get GROUP_SUBSCRIBED_TO_TOPIC. Partitions the
// metadata lacks get UNKNOWN_TOPIC_OR_PARTITION. Deletions are tombstones
// appended to __consumer_offsets; the answer waits for the append.
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/group"
)

func init() { register(47, 0, handleOffsetDelete) }

func handleOffsetDelete(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.OffsetDeleteRequest)
	resp := kmsg.NewPtrOffsetDeleteResponse()
	partition, err := n.groups.partitionOf(req.Group)
	if req.Group == "" {
		err = kerr.InvalidGroupID
	}
	// Kafka's checks (authorize.go): DELETE on the group, READ on each topic.
	az := n.authorizer()
	if !r.allowed(az, authz.OpDelete, authz.ResGroup, req.Group) {
		err = kerr.GroupAuthorizationFailed
	}
	var subscribed map[string]bool
	if err == nil {
		subscribed, err = n.groupSubscriptions(ctx, req.Group)
	}
	if err != nil {
		resp.ErrorCode = errCode(err)
		return encodeResponse(r, resp), nil
	}
	var del []group.TopicPartition
	type slot struct{ t, p int }
	var slots []slot
	for ti, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, tp := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = tp.Partition
			switch {
			case !r.allowed(az, authz.OpRead, authz.ResTopic, t.Topic):
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !n.partitionExists(t.Topic, tp.Partition):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case subscribed[t.Topic]:
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			default:
				del = append(del, group.TopicPartition{Topic: t.Topic, Partition: tp.Partition})
				slots = append(slots, slot{ti, len(rt.Partitions)})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(del) > 0 {
		if err := n.groups.store.DeleteOffsets(ctx, partition, req.Group, del); err != nil {
			code := commitErrCode(err)
			if code == kerr.NotCoordinator.Code || code == kerr.CoordinatorNotAvailable.Code {
				resp.ErrorCode, resp.Topics = code, nil
			} else {
				for _, s := range slots {
					resp.Topics[s.t].Partitions[s.p].ErrorCode = code
				}
			}
		}
	}
	return encodeResponse(r, resp), nil
}

// groupSubscriptions returns the topics a group's members subscribe to
// (empty for an Empty group or offsets committed outside a group), or
// GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP as OffsetDelete answers them.
func (n *Node) groupSubscriptions(ctx context.Context, groupID string) (map[string]bool, error) {
	st, known := n.groups.members.GroupState(groupID)
	known = known || n.groupIsConsumer(groupID) // KIP-848 groups: topicsInUse has their subscriptions
	hasOffsets := len(n.groups.store.FetchAll(groupID)) > 0
	if !known && !hasOffsets || st == "Dead" {
		return nil, kerr.GroupIDNotFound
	}
	topics, all, err := n.groups.topicsInUse(ctx, groupID)
	switch {
	case err != nil:
		return nil, err
	case all:
		return nil, kerr.NonEmptyGroup // subscriptions unknown: as Kafka, refuse
	}
	return topics, nil
}
