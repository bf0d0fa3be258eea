package broker

// DeleteShareGroupState (key 86), version 0 (kmsg's newest).
//
// Behaviour: an inter-broker RPC of KIP-932: the group coordinator removes
// a share-partition's state (DeleteGroups of a share group,
// DeleteShareGroupOffsets). CLUSTER_ACTION on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED on every partition. Each key gets
// tombstones of its ShareSnapshot and ShareUpdate keys, answered once
// committed; a key with no state is a success with nothing written, as
// Kafka. UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not
// have (a deleted topic's state goes with the topic in Kafka; here it
// stays until the group deletes it).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/share"
)

func init() { register(86, 0, handleDeleteShareGroupState) }

func handleDeleteShareGroupState(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DeleteShareGroupStateRequest)
	resp := kmsg.NewPtrDeleteShareGroupStateResponse()
	denied := !r.allowedCluster(n.authorizer(), authz.OpClusterAction)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			var err error = kerr.ClusterAuthorizationFailed
			if !denied {
				err = n.shares.delete(ctx, share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition})
			}
			rp.ErrorCode, rp.ErrorMessage = shareStateErr(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return encodeResponse(r, resp), nil
}
