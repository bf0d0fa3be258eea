package broker

// DescribeShareGroupOffsets (key 90), versions 0-1 (v1: Lag, KIP-1226).
//
// Behaviour: answered by the group's coordinator (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE per group
// otherwise); DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED. Per
// share-partition: the share-partition start offset and leader epoch from
// the share coordinator (ReadShareGroupStateSummary through the node's
// persister), -1 for a share-partition with no state or a topic that does
// not exist (no error, as Kafka); v1's Lag is high watermark - start
// offset - delivery-complete count (-1 when either is unknown). A topic
// not authorized for DESCRIBE gets TOPIC_AUTHORIZATION_FAILED on each
// partition with a zero topic id. Topics null describes every
// share-partition the group has state for, dropping unauthorized topics
// silently; an empty list answers no topics.
//
// Differences from Kafka: describe-all asks the share coordinator about
// every partition of every topic (share_offsets.go) rather than reading
// the group's list of initialized topics.

import (
	"context"
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/share"
)

const describeShareGroupOffsetsKey = 90

func init() { register(describeShareGroupOffsetsKey, 0, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := kmsg.NewPtrDescribeShareGroupOffsetsResponse()
	az := n.authorizer()
	for _, g := range req.Groups {
		rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID = g.GroupID
		if !r.allowed(az, authz.OpDescribe, authz.ResGroup, g.GroupID) {
			rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		if _, err := n.groups.partitionOf(g.GroupID); err != nil {
			rg.ErrorCode, rg.ErrorMessage = shareStateErr(err)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		if g.Topics == nil {
			states := n.shareGroupStates(ctx, g.GroupID)
			topics := make([]shareTopic, 0, len(states))
			for t := range states {
				topics = append(topics, t)
			}
			sort.Slice(topics, func(i, j int) bool { return topics[i].name < topics[j].name })
			for _, t := range topics {
				if !r.allowed(az, authz.OpDescribe, authz.ResTopic, t.name) {
					continue
				}
				rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				rt.Topic, rt.TopicID = t.name, t.id
				for _, s := range states[t] {
					rt.Partitions = append(rt.Partitions, n.describeSharePartition(ctx, r.version, t, s))
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		for _, gt := range g.Topics {
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic = gt.Topic
			t, exists := n.shareTopicByName(gt.Topic)
			authorized := r.allowed(az, authz.OpDescribe, authz.ResTopic, gt.Topic)
			if authorized && exists {
				rt.TopicID = t.id
			}
			for _, p := range gt.Partitions {
				var rp kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition
				switch {
				case !authorized:
					rp = kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					rp.Partition, rp.StartOffset, rp.Lag = p, -1, -1
					rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				case !exists:
					rp = kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					rp.Partition, rp.StartOffset, rp.Lag = p, -1, -1
				default:
					st, err := n.sharePersister.Summary(ctx, share.Key{Group: g.GroupID, TopicID: t.id, Partition: p})
					s := shareStateOf{partition: p, st: st, ok: err == nil, err: err}
					if errors.Is(err, share.ErrNoState) {
						s.err = nil
					}
					rp = n.describeSharePartition(ctx, r.version, t, s)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return encodeResponse(r, resp), nil
}

// describeSharePartition is one partition of the answer.
func (n *Node) describeSharePartition(ctx context.Context, version int16, t shareTopic, s shareStateOf) kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition {
	rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
	rp.Partition, rp.StartOffset, rp.Lag = s.partition, -1, -1
	if s.err != nil {
		rp.ErrorCode, rp.ErrorMessage = shareStateErr(s.err)
		return rp
	}
	if !s.ok {
		return rp
	}
	rp.StartOffset, rp.LeaderEpoch = s.st.StartOffset, s.st.LeaderEpoch
	if version >= 1 && s.st.DeliveryCompleteCount >= 0 {
		if hw, err := n.partitionHighWatermark(ctx, t, s.partition); err == nil {
			rp.Lag = max(0, hw-s.st.StartOffset-int64(s.st.DeliveryCompleteCount))
		}
	}
	return rp
}
