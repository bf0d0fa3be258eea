package broker

// ReadShareGroupStateSummary (key 87), versions 0-1 (v1:
// DeliveryCompleteCount, KIP-1226).
//
// Behaviour: an inter-broker RPC of KIP-932: the group coordinator reads a
// share-partition's start offset and epochs (DescribeShareGroupOffsets),
// without its batches. CLUSTER_ACTION on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED on every partition. A key with no state
// answers start offset -1, state and leader epoch 0, no error, as Kafka;
// nothing is written (the request's leader epoch is not recorded).
// UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not have.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/share"
)

func init() { register(87, 0, handleReadShareGroupStateSummary) }

func handleReadShareGroupStateSummary(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ReadShareGroupStateSummaryRequest)
	resp := kmsg.NewPtrReadShareGroupStateSummaryResponse()
	denied := !r.allowedCluster(n.authorizer(), authz.OpClusterAction)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateSummaryResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			rp.Partition, rp.StartOffset, rp.DeliveryCompleteCount = p.Partition, -1, -1
			var err error = kerr.ClusterAuthorizationFailed
			if !denied {
				var st share.PersistedState
				var ok bool
				st, ok, err = n.shares.summary(ctx, share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition})
				if err == nil && ok {
					rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, rp.DeliveryCompleteCount = st.StateEpoch, st.LeaderEpoch, st.StartOffset, st.DeliveryCompleteCount
				}
			}
			rp.ErrorCode, rp.ErrorMessage = shareStateErr(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return encodeResponse(r, resp), nil
}
