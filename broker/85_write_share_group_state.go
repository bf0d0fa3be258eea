package broker

// WriteShareGroupState (key 85), versions 0-1 (v1: DeliveryCompleteCount,
// KIP-1226).
//
// Behaviour: an inter-broker RPC of KIP-932: a share-partition leader
// persists what changed (start offset, -1 when unchanged, and the state
// batches of the changed offsets). CLUSTER_ACTION on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED on every partition. Each key is a
// ShareUpdate record (a ShareSnapshot every
// share.coordinator.snapshot.update.records.per.snapshot, 500, updates),
// answered once committed on the ISR: an acknowledged write survives the
// loss of the coordinator's leader. FENCED_STATE_EPOCH when the state
// epoch is not the stored one (the group's offsets were reset meanwhile),
// FENCED_LEADER_EPOCH when the leader epoch is below the stored one; -1
// skips either check. A share-partition never initialized is
// INVALID_REQUEST, as Kafka. v0 carries no DeliveryCompleteCount: it is
// stored as unknown (-1).
//
// Differences from Kafka: a state epoch above the stored one is fenced
// too (Kafka only fences a lower one; no leader sends a higher one).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/share"
)

func init() { register(85, 0, handleWriteShareGroupState) }

func handleWriteShareGroupState(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.WriteShareGroupStateRequest)
	resp := kmsg.NewPtrWriteShareGroupStateResponse()
	denied := !r.allowedCluster(n.authorizer(), authz.OpClusterAction)
	for _, t := range req.Topics {
		rt := kmsg.NewWriteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			var err error = kerr.ClusterAuthorizationFailed
			if !denied {
				u := share.Update{StartOffset: p.StartOffset, DeliveryCompleteCount: -1}
				if r.version >= 1 {
					u.DeliveryCompleteCount = p.DeliveryCompleteCount
				}
				for _, b := range p.StateBatches {
					u.Batches = append(u.Batches, share.StateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
						DeliveryState: share.RecordState(b.DeliveryState), DeliveryCount: b.DeliveryCount})
				}
				if err = validStateBatches(u.Batches); err == nil {
					err = n.shares.write(ctx, share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}, p.StateEpoch, p.LeaderEpoch, u)
				}
			}
			rp.ErrorCode, rp.ErrorMessage = shareStateErr(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return encodeResponse(r, resp), nil
}

// validStateBatches refuses (INVALID_REQUEST) batches no leader writes: a
// reversed range, a negative offset, a delivery state other than
// available, acknowledged or archived, a negative delivery count.
func validStateBatches(bs []share.StateBatch) error {
	for _, b := range bs {
		switch {
		case b.FirstOffset < 0, b.LastOffset < b.FirstOffset, b.DeliveryCount < 0:
			return kerr.InvalidRequest
		case b.DeliveryState != share.Available && b.DeliveryState != share.Acknowledged && b.DeliveryState != share.Archived:
			return kerr.InvalidRequest
		}
	}
	return nil
}
