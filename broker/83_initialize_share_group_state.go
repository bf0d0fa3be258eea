package broker

// InitializeShareGroupState (key 83), version 0 (kmsg's newest).
//
// Behaviour: an inter-broker RPC of KIP-932 (the group coordinator, or
// AlterShareGroupOffsets, sets a share-partition's start offset and state
// epoch). CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED
// on every partition, as Kafka. Each (topic id, partition) is one key of
// the share coordinator (share_coordinator.go): a ShareSnapshot record at
// the state epoch with no batches, answered once committed;
// FENCED_STATE_EPOCH for an epoch below the stored one,
// UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not have,
// NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
// COORDINATOR_NOT_AVAILABLE as the coordinator moves.
//
// Differences from Kafka: keys are served one after another, not in
// parallel per state partition.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/share"
)

func init() { register(83, 0, handleInitializeShareGroupState) }

// shareStateErr is the code and message of a share-state operation's error.
func shareStateErr(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	return errCode(err), kmsg.StringPtr(err.Error())
}

func handleInitializeShareGroupState(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.InitializeShareGroupStateRequest)
	resp := kmsg.NewPtrInitializeShareGroupStateResponse()
	denied := !r.allowedCluster(n.authorizer(), authz.OpClusterAction)
	for _, t := range req.Topics {
		rt := kmsg.NewInitializeShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			var err error = kerr.ClusterAuthorizationFailed
			if !denied {
				err = n.shares.initialize(ctx, share.Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}, p.StateEpoch, p.StartOffset)
			}
			rp.ErrorCode, rp.ErrorMessage = shareStateErr(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return encodeResponse(r, resp), nil
}
