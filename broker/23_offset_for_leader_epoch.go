package broker

// OffsetForLeaderEpoch (key 23), versions 2 (the first with
// CurrentLeaderEpoch, KIP-320) through kmsg's newest (4).
//
// Behaviour, per partition, from the leader's leader-epoch cache
// (storage's leader-epoch-checkpoint), as Kafka's
// UnifiedLog.endOffsetForEpoch:
//
//	requested epoch is the latest       (epoch, log end offset)
//	an older epoch the cache knows       (epoch, start offset of the next epoch)
//	an epoch between known ones          (largest known epoch below it, start of the next)
//	below the first known epoch          (requested, first known start offset)
//	above every known epoch, or no cache (-1, -1), no error
//
// CurrentLeaderEpoch (>= 0) is checked as Fetch and ListOffsets check it:
// older than the partition's epoch FENCED_LEADER_EPOCH, newer
// UNKNOWN_LEADER_EPOCH. Errors: UNKNOWN_TOPIC_OR_PARTITION,
// NOT_LEADER_OR_FOLLOWER (only the leader answers, for consumers and
// followers alike, as Kafka's fetchOnlyFromLeader).
//
// Differences from Kafka: v0-v1 (inter-broker only, before KIP-320) are
// not served; the end offset of the latest epoch is the log end offset,
// which on one node is also the high watermark.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/storage/checkpoint"
)

func init() { register(23, 2, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.OffsetForLeaderEpochRequest)
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	// Kafka's check (authorize.go): a follower (ReplicaID >= 0) needs
	// CLUSTER_ACTION, a consumer DESCRIBE on the topic.
	az := n.authorizer()
	clusterOK := req.ReplicaID < 0 || r.allowedCluster(az, authz.OpClusterAction)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		_, exists, topicErr := n.resolveTopic(false, t.Topic, [16]byte{})
		if !clusterOK || req.ReplicaID < 0 && !r.allowed(az, authz.OpDescribe, authz.ResTopic, t.Topic) {
			topicErr = kerr.TopicAuthorizationFailed
		}
		for _, tp := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = tp.Partition
			err := topicErr
			if err == nil {
				err = n.endOffsetForEpoch(t.Topic, exists, tp, &rp)
			}
			rp.ErrorCode = errCode(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return encodeResponse(r, resp), nil
}

func (n *Node) endOffsetForEpoch(topic string, exists bool, tp kmsg.OffsetForLeaderEpochRequestTopicPartition, rp *kmsg.OffsetForLeaderEpochResponseTopicPartition) error {
	p := n.partition(topic, tp.Partition)
	if p == nil {
		return n.missingPartitionErr(topic, exists, tp.Partition)
	}
	if err := p.checkLeader(tp.CurrentLeaderEpoch); err != nil {
		return err
	}
	epoch, end := p.log.LeaderEpochs().EndOffsetFor(tp.LeaderEpoch, p.log.LogEndOffset())
	if end == checkpoint.UndefinedEpochOffset {
		epoch = checkpoint.UndefinedEpoch
	}
	rp.LeaderEpoch, rp.EndOffset = epoch, end
	return nil
}
