package metadata

import (
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
)

// AlterPartitionRequest is a partition leader's request to change the ISR
// (Kafka's AlterPartition). LeaderEpoch and PartitionEpoch are the leader's
// view of the partition; they must match the image, so a leader acting on
// stale state is refused.
type AlterPartitionRequest struct {
	BrokerID       int32
	BrokerEpoch    int64
	TopicID        uuid.UUID
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
	// NewISRWithEpochs is AlterPartition v3's ISR (KIP-903): each member
	// with the broker epoch the leader saw in its fetches (-1 unknown).
	// When set it is the new ISR and NewISR is ignored.
	NewISRWithEpochs    []ISRMember
	LeaderRecoveryState int8
}

// ISRMember is one member of a requested ISR with its broker epoch.
type ISRMember struct {
	BrokerID    int32
	BrokerEpoch int64
}

// AlterPartitionResult is the partition as it will be once the planned
// record applies (or as it is, on error or no-op).
type AlterPartitionResult struct {
	Err            error
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// PlanAlterPartition validates an ISR change, in Kafka's order:
//  1. STALE_BROKER_EPOCH: the broker is unregistered or BrokerEpoch is not
//     its current epoch;
//  2. UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION;
//  3. leader epoch: older than the image → FENCED_LEADER_EPOCH; newer →
//     NOT_CONTROLLER (this controller is behind);
//  4. INVALID_REQUEST: the requester is not the leader;
//  5. partition epoch: older → INVALID_UPDATE_VERSION; newer → NOT_CONTROLLER;
//  6. INVALID_REQUEST: the new ISR is empty, repeats a broker, names a
//     non-replica, or lacks the leader;
//  7. INELIGIBLE_REPLICA: a member other than the leader is unregistered,
//     fenced or shutting down, or is not in the ISR already: replication
//     is not built yet (see [MaxReplicationFactor]), so an ISR may shrink
//     but never grow.
//
// An unchanged ISR plans nothing and returns the current partition. On
// success one PartitionChangeRecord (ISR only) is planned, and the result
// carries the partition epoch it will have.
func (s *State) PlanAlterPartition(req AlterPartitionRequest) ([]Record, AlterPartitionResult) {
	fail := func(err error) ([]Record, AlterPartitionResult) {
		return nil, AlterPartitionResult{Err: err, Leader: NoLeader}
	}
	if b, ok := s.brokers[req.BrokerID]; !ok || b.Epoch != req.BrokerEpoch {
		return fail(fmt.Errorf("%w: broker %d epoch %d", kerr.StaleBrokerEpoch, req.BrokerID, req.BrokerEpoch))
	}
	if _, ok := s.topics[req.TopicID]; !ok {
		return fail(fmt.Errorf("%w: %s", kerr.UnknownTopicID, req.TopicID))
	}
	p := s.partition(req.TopicID, req.Partition)
	if p == nil {
		return fail(fmt.Errorf("%w: partition %d", kerr.UnknownTopicOrPartition, req.Partition))
	}
	current := AlterPartitionResult{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: slices.Clone(p.ISR)}
	refuse := func(err error) ([]Record, AlterPartitionResult) {
		r := current
		r.Err = err
		return nil, r
	}
	switch {
	case req.LeaderEpoch < p.LeaderEpoch:
		return refuse(fmt.Errorf("%w: leader epoch %d, current %d", kerr.FencedLeaderEpoch, req.LeaderEpoch, p.LeaderEpoch))
	case req.LeaderEpoch > p.LeaderEpoch:
		return refuse(fmt.Errorf("%w: leader epoch %d ahead of %d", kerr.NotController, req.LeaderEpoch, p.LeaderEpoch))
	case req.BrokerID != p.Leader:
		return refuse(fmt.Errorf("%w: broker %d is not the leader (%d)", kerr.InvalidRequest, req.BrokerID, p.Leader))
	case req.PartitionEpoch < p.PartitionEpoch:
		return refuse(fmt.Errorf("%w: partition epoch %d, current %d", kerr.InvalidUpdateVersion, req.PartitionEpoch, p.PartitionEpoch))
	case req.PartitionEpoch > p.PartitionEpoch:
		return refuse(fmt.Errorf("%w: partition epoch %d ahead of %d", kerr.NotController, req.PartitionEpoch, p.PartitionEpoch))
	}
	if len(req.NewISR) == 0 {
		return refuse(fmt.Errorf("%w: empty ISR", kerr.InvalidRequest))
	}
	if err := checkAssignment(p.Replicas, req.NewISR, p.Leader); err != nil {
		return refuse(fmt.Errorf("%w: %v", kerr.InvalidRequest, err))
	}
	for _, r := range req.NewISR {
		if r != p.Leader && !s.eligible(r, -1) {
			return refuse(fmt.Errorf("%w: broker %d", kerr.IneligibleReplica, r))
		}
		if r != p.Leader && !slices.Contains(p.ISR, r) {
			return refuse(fmt.Errorf("%w: broker %d cannot join the ISR: replication is not built yet, no follower holds the leader's records", kerr.IneligibleReplica, r))
		}
	}
	if slices.Equal(req.NewISR, p.ISR) {
		return nil, current
	}
	res := current
	res.ISR = slices.Clone(req.NewISR)
	res.PartitionEpoch++
	return []Record{&PartitionChangeRecord{TopicID: p.TopicID, Partition: p.Partition, ISR: slices.Clone(req.NewISR)}}, res
}
