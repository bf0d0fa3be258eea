package broker

// AlterShareGroupOffsets (key 91), version 0 (kmsg's newest).
//
// Behaviour: answered by the group's coordinator (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE as the
// top-level error otherwise); READ on the group (Kafka's choice, not
// ALTER), else GROUP_AUTHORIZATION_FAILED; a share group with members is
// NON_EMPTY_GROUP; a classic or consumer group of that id is
// GROUP_ID_NOT_FOUND; a group that does not exist yet is an empty share
// group, as Kafka creates it. Per topic: READ on it, else
// TOPIC_AUTHORIZATION_FAILED on each partition; a topic or partition the
// metadata does not have is UNKNOWN_TOPIC_OR_PARTITION; a negative start
// offset INVALID_REQUEST. Each share-partition's state is reset to the
// start offset with nothing in flight: InitializeShareGroupState at the
// stored state epoch + 1 (0 for a share-partition with no state), which
// fences the writes of a share-partition leader still holding the old
// state (FENCED_STATE_EPOCH: it re-reads).
//
// Differences from Kafka: the group's list of initialized topics
// (ShareGroupStatePartitionMetadata) is not written here; the membership
// slice owns that record.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/share"
)

const alterShareGroupOffsetsKey = 91

func init() { register(alterShareGroupOffsetsKey, 0, handleAlterShareGroupOffsets) }

func handleAlterShareGroupOffsets(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := kmsg.NewPtrAlterShareGroupOffsetsResponse()
	az := n.authorizer()
	fail := func(err error) (*frame, error) {
		resp.ErrorCode, resp.ErrorMessage = shareStateErr(err)
		return encodeResponse(r, resp), nil
	}
	if _, err := n.shareOffsetsGroupCheck(r, az, authz.OpRead, req.GroupID); err != nil {
		return fail(err)
	}
	for _, rt := range req.Topics {
		ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t, exists := n.shareTopicByName(rt.Topic)
		authorized := r.allowed(az, authz.OpRead, authz.ResTopic, rt.Topic)
		if authorized && exists {
			ot.TopicID = t.id
		}
		for _, rp := range rt.Partitions {
			op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			var err error
			switch {
			case !authorized:
				err = kerr.TopicAuthorizationFailed
			case !exists, rp.Partition < 0, rp.Partition >= t.partitions:
				err = kerr.UnknownTopicOrPartition
			case rp.StartOffset < 0:
				err = kerr.InvalidRequest
			default:
				err = n.resetShareState(ctx, share.Key{Group: req.GroupID, TopicID: t.id, Partition: rp.Partition}, rp.StartOffset)
			}
			op.ErrorCode, op.ErrorMessage = shareStateErr(err)
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return encodeResponse(r, resp), nil
}

// resetShareState sets k's state to start with nothing in flight, at the
// next state epoch.
func (n *Node) resetShareState(ctx context.Context, k share.Key, start int64) error {
	epoch := int32(0)
	switch st, err := n.sharePersister.Summary(ctx, k); {
	case err == nil:
		epoch = st.StateEpoch + 1
	case !errors.Is(err, share.ErrNoState):
		return err
	}
	return n.sharePersister.Initialize(ctx, k, epoch, start)
}

// shareOffsetsGroupCheck is the group-level part of Alter and
// DeleteShareGroupOffsets: op on the group (GROUP_AUTHORIZATION_FAILED),
// this broker its coordinator, not a classic or consumer group
// (GROUP_ID_NOT_FOUND, as Kafka), and no members (NON_EMPTY_GROUP). exists
// is whether the membership knows the group.
func (n *Node) shareOffsetsGroupCheck(r *request, az *authz.Authorizer, op authz.Operation, group string) (exists bool, err error) {
	if !r.allowed(az, op, authz.ResGroup, group) {
		return false, kerr.GroupAuthorizationFailed
	}
	if _, err := n.groups.partitionOf(group); err != nil {
		return false, err
	}
	if e := n.groups.sgs.otherGroupType(group); e != nil {
		return false, e
	}
	exists, empty := n.shareGroupIsEmpty(group)
	if exists && !empty {
		return true, kerr.NonEmptyGroup
	}
	return exists, nil
}
