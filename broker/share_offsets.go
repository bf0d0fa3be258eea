package broker

// Helpers of the share-group offset admin APIs (DescribeShareGroupOffsets
// 90, AlterShareGroupOffsets 91, DeleteShareGroupOffsets 92): topic
// lookups, the share-partitions a group has state for, and a partition's
// high watermark for the lag.

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/controller/metadata"
)

// shareTopic is one topic as the share admin APIs see it.
type shareTopic struct {
	name       string
	id         [16]byte
	partitions int32
}

// shareTopicByName looks a topic up in the metadata view.
func (n *Node) shareTopicByName(name string) (shareTopic, bool) {
	var out shareTopic
	var ok bool
	n.view(func(st *metadata.State) {
		var t metadata.TopicInfo
		if t, ok = st.TopicByName(name); ok {
			out = shareTopic{name: t.Name, id: t.ID, partitions: t.NumPartitions}
		}
	})
	return out, ok
}

// shareStateOf is one share-partition's summary (ok false: no state).
type shareStateOf struct {
	partition int32
	st        share.PersistedState
	ok        bool
	err       error
}

// shareGroupStates returns, per topic, the partitions of t's that group
// has share state for (describe-all of DescribeShareGroupOffsets). It
// asks the share coordinator for every partition of every non-internal
// topic: Kafka reads the group's list of initialized topics (its
// ShareGroupStatePartitionMetadata record, sharegroup.Group.Initialized
// here) instead, which does not cover the share state
// AlterShareGroupOffsets left for a group the membership does not know.
func (n *Node) shareGroupStates(ctx context.Context, group string) map[shareTopic][]shareStateOf {
	var topics []shareTopic
	n.view(func(st *metadata.State) {
		for _, t := range st.Topics() {
			if t.Name == offsetsTopic || t.Name == txnStateTopic || t.Name == shareStateTopic {
				continue
			}
			topics = append(topics, shareTopic{name: t.Name, id: t.ID, partitions: t.NumPartitions})
		}
	})
	out := map[shareTopic][]shareStateOf{}
	for _, t := range topics {
		for p := int32(0); p < t.partitions; p++ {
			st, err := n.sharePersister.Summary(ctx, share.Key{Group: group, TopicID: t.id, Partition: p})
			if errors.Is(err, share.ErrNoState) {
				continue
			}
			out[t] = append(out[t], shareStateOf{partition: p, st: st, ok: err == nil, err: err})
		}
	}
	return out
}

// partitionHighWatermark is topic-p's high watermark: this broker's if it
// leads the partition, else its leader's answer to a ListOffsets (latest)
// over the inter-broker listener.
func (n *Node) partitionHighWatermark(ctx context.Context, t shareTopic, p int32) (int64, error) {
	if lp := n.partition(t.name, p); lp != nil && lp.leader.Load() {
		return lp.hw.Load(), nil
	}
	leader := metadata.NoLeader
	n.view(func(st *metadata.State) {
		if pi, ok := st.Partition(uuid.UUID(t.id), p); ok {
			leader = pi.Leader
		}
	})
	if leader == metadata.NoLeader || leader == n.cfg.NodeID {
		return -1, kerr.LeaderNotAvailable
	}
	cl, err := n.shares.clients.get(n, leader, "share-admin")
	if err != nil {
		return -1, err
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = t.name
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, shareRPCTimeout)
	defer cancel()
	resp, err := shareRequest(rctx, cl, req)
	if err != nil {
		n.shares.clients.drop(leader, cl)
		return -1, err
	}
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, rp := range t.Partitions {
			if rp.Partition == p {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return -1, err
				}
				return rp.Offset, nil
			}
		}
	}
	return -1, kerr.UnknownServerError
}
