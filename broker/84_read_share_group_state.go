package broker

// ReadShareGroupState (key 84), version 0 (kmsg's newest).
//
// Behaviour: an inter-broker RPC of KIP-932: a share-partition leader reads
// the durable state of a share-partition it starts to lead. CLUSTER_ACTION
// on the cluster, else CLUSTER_AUTHORIZATION_FAILED on every partition.
// Each key answers its state epoch, start offset and state batches; a
// leader epoch above the stored one is recorded first (a ShareUpdate,
// committed before the answer), one below is FENCED_LEADER_EPOCH (a stale
// leader), -1 is not checked. A share-partition never initialized is
// INVALID_REQUEST, as Kafka; UNKNOWN_TOPIC_OR_PARTITION for a partition the
// metadata does not have; coordinator errors as InitializeShareGroupState.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/share"
)

func init() { register(84, 0, handleReadShareGroupState) }

func handleReadShareGroupState(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ReadShareGroupStateRequest)
	resp := kmsg.NewPtrReadShareGroupStateResponse()
	denied := !r.allowedCluster(n.authorizer(), authz.OpClusterAction)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition, rp.StartOffset = p.Partition, -1
			var err error = kerr.ClusterAuthorizationFailed
			if !denied {
				var st share.PersistedState
				st, err = n.shares.read(ctx, share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}, p.LeaderEpoch)
				if err == nil {
					rp.StateEpoch, rp.StartOffset = st.StateEpoch, st.StartOffset
					for _, b := range st.Batches {
						sb := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
						sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.FirstOffset, b.LastOffset, int8(b.DeliveryState), b.DeliveryCount
						rp.StateBatches = append(rp.StateBatches, sb)
					}
				}
			}
			rp.ErrorCode, rp.ErrorMessage = shareStateErr(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return encodeResponse(r, resp), nil
}
