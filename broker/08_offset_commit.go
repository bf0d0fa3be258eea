package broker

// OffsetCommit (key 8), versions 0 through kmsg's newest (10; topics by id
// from v10).
//
// Behaviour: the group's __consumer_offsets partition must be led and
// loaded here (else NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
// COORDINATOR_NOT_AVAILABLE for every partition). v1+ commits carry the
// member's generation and id, checked by the membership state machine
// (group.Coordinator.ValidateCommit: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS); generation -1 with an empty
// member id is a simple commit, allowed while the group has no members.
// v0 commits are simple commits. Per partition: UNKNOWN_TOPIC_OR_PARTITION
// (UNKNOWN_TOPIC_ID by id) for partitions the metadata lacks,
// OFFSET_METADATA_TOO_LARGE over offset.metadata.max.bytes. The valid
// partitions are written as one batch of OffsetCommit records (Kafka's
// schema) through the partition's leader append; the answer is sent only
// once the batch is appended, and the offsets become visible to OffsetFetch
// at the same moment. v2-v4 RetentionTimeMillis (>= 0) sets an explicit
// expire timestamp (written as OffsetCommitValue v1, as Kafka does).
//
// Differences from Kafka: v1's per-partition Timestamp is ignored (the
// commit time is the broker's; Kafka 2.1+ ignores it too for expiry).
// Transactional offset commits are TxnOffsetCommit's
// (28_txn_offset_commit.go); a commit of either kind replaces the other's
// only if its record is newer in the log.

import (
	"cmp"
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(8, 0, handleOffsetCommit) }

func handleOffsetCommit(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.OffsetCommitRequest)
	resp := kmsg.NewPtrOffsetCommitResponse()
	byID := r.version >= 10

	// One error for the whole request, or nil.
	var reqErr error
	partition, err := n.groups.partitionOf(req.Group)
	az := n.authorizer() // authorize.go: READ on the group, then on each topic
	switch {
	case !r.allowed(az, authz.OpRead, authz.ResGroup, req.Group):
		reqErr = kerr.GroupAuthorizationFailed
	case req.Group == "":
		reqErr = kerr.InvalidGroupID
	case err != nil:
		reqErr = err
	case n.groupIsShare(req.Group):
		reqErr = kerr.GroupIDNotFound // a share group commits no offsets (Kafka: "Group %s is not a consumer group.")
	case n.groupIsConsumer(req.Group):
		// A KIP-848 group: the member epoch (v9+ GenerationIdOrMemberEpoch).
		var handled bool
		if handled, reqErr = n.groups.cgs.validateCommit(req.Group, req.MemberID, req.Generation, false, r.version); !handled {
			reqErr = n.groups.members.ValidateCommit(req.Group, req.Generation, req.MemberID, req.InstanceID)
		}
	case r.version >= 1:
		reqErr = n.groups.members.ValidateCommit(req.Group, req.Generation, req.MemberID, req.InstanceID)
	default:
		reqErr = n.groups.members.ValidateCommit(req.Group, -1, "", nil)
	}

	now := time.Now().UnixMilli()
	expire := int64(-1)
	if r.version >= 2 && r.version <= 4 && req.RetentionTimeMillis >= 0 {
		expire = now + req.RetentionTimeMillis
	}
	type slot struct{ t, p int }
	var commits []group.Commit
	var slots []slot
	for ti, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name, topicErr := t.Topic, error(nil)
		if reqErr == nil {
			name, _, topicErr = n.resolveTopic(byID, t.Topic, t.TopicID)
			if authName := cmp.Or(name, t.Topic); authName != "" && !r.allowed(az, authz.OpRead, authz.ResTopic, authName) {
				topicErr = kerr.TopicAuthorizationFailed
			}
		}
		for _, tp := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = tp.Partition
			var err error
			switch {
			case reqErr != nil:
				err = reqErr
			case topicErr != nil:
				err = topicErr
			case !n.partitionExists(name, tp.Partition):
				err = kerr.UnknownTopicOrPartition
			case tp.Metadata != nil && len(*tp.Metadata) > n.cfg.OffsetMetadataMaxBytes:
				err = kerr.OffsetMetadataTooLarge
			}
			if err == nil {
				md := ""
				if tp.Metadata != nil {
					md = *tp.Metadata
				}
				epoch := int32(-1)
				if r.version >= 6 {
					epoch = tp.LeaderEpoch
				}
				commits = append(commits, group.Commit{
					TopicPartition: group.TopicPartition{Topic: name, Partition: tp.Partition},
					Offset:         group.Offset{Offset: tp.Offset, LeaderEpoch: epoch, Metadata: md, CommitTimestamp: now, ExpireTimestamp: expire},
				})
				slots = append(slots, slot{ti, len(rt.Partitions)})
			}
			rp.ErrorCode = errCode(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(commits) > 0 {
		if err := n.groups.store.Commit(ctx, partition, req.Group, commits); err != nil {
			code := commitErrCode(err)
			for _, s := range slots {
				resp.Topics[s.t].Partitions[s.p].ErrorCode = code
			}
		} else {
			n.groups.commits.Add(float64(len(commits)))
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				n.groups.commitFails.Inc()
			}
		}
	}
	return encodeResponse(r, resp), nil
}

// commitErrCode maps a failed append of group records to what Kafka's
// coordinator answers (GroupMetadataManager.storeOffsets): leadership
// lost → NOT_COORDINATOR; a record too large → INVALID_COMMIT_OFFSET_SIZE;
// anything else → COORDINATOR_NOT_AVAILABLE (the client retries).
func commitErrCode(err error) int16 {
	switch code := errCode(err); code {
	case kerr.NotLeaderForPartition.Code, kerr.NotCoordinator.Code:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code:
		return kerr.InvalidCommitOffsetSize.Code
	case kerr.RequestTimedOut.Code:
		return code
	default:
		return kerr.CoordinatorNotAvailable.Code
	}
}

// partitionExists reports whether the metadata has the partition.
func (n *Node) partitionExists(topic string, index int32) bool {
	found := false
	n.view(func(st *metadata.State) {
		if t, ok := st.TopicByName(topic); ok {
			_, found = st.Partition(t.ID, index)
		}
	})
	return found
}
