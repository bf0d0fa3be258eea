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
	NewISRWithEpochs    []ISRMember `json:",omitempty"`
	LeaderRecoveryState int8        `json:",omitempty"`
}

// ISRMember is one member of a requested ISR with its broker epoch.
type ISRMember struct {
	BrokerID    int32
	BrokerEpoch int64
}

// AlterPartitionResult is the partition as it will be once the planned
// record applies (or as it is, on error or no-op).
type AlterPartitionResult struct {
	Err                 error
	Leader              int32
	LeaderEpoch         int32
	PartitionEpoch      int32
	ISR                 []int32
	LeaderRecoveryState int8
}

// PlanAlterPartition validates an ISR change, in Kafka's order
// (ReplicationControlManager.alterPartition / validateAlterPartitionData):
//  1. STALE_BROKER_EPOCH: the broker is unregistered or BrokerEpoch is not
//     its current epoch;
//  2. UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION;
//  3. NOT_CONTROLLER: a leader epoch or partition epoch newer than the
//     image's (this controller is behind);
//  4. FENCED_LEADER_EPOCH: an older leader epoch;
//  5. INVALID_REQUEST: the requester is not the leader;
//  6. INVALID_UPDATE_VERSION: an older partition epoch;
//  7. INVALID_REQUEST: the new ISR is empty, repeats a broker, names a
//     non-replica, or lacks the leader; has more than one member while
//     the partition stays RECOVERING (KIP-704); or asks to go from
//     RECOVERED back to RECOVERING;
//  8. INELIGIBLE_REPLICA: a member is unregistered, fenced or in
//     controlled shutdown (KIP-841), or its broker epoch (KIP-903,
//     NewISRWithEpochs; -1 = not checked) is not its registered one.
//
// The ISR may shrink and grow. The new ISR is NewISRWithEpochs when set
// (AlterPartition v3), else NewISR. A shrink below the effective min ISR
// moves the removed members into the ELR; an ISR back at min ISR clears
// the ELR (KIP-966, see [State.changePartition]). LeaderRecoveryState
// RECOVERED from the leader of a RECOVERING partition completes its
// recovery. An unchanged partition plans nothing and returns it as it is.
// On success one PartitionChangeRecord is planned, and the result carries
// the partition epoch it will have.
func (s *State) PlanAlterPartition(req AlterPartitionRequest) ([]Record, AlterPartitionResult) {
	fail := func(err error) ([]Record, AlterPartitionResult) {
		return nil, AlterPartitionResult{Err: err, Leader: NoLeader}
	}
	if b, ok := s.brokers[req.BrokerID]; !ok || b.Epoch != req.BrokerEpoch {
		return fail(fmt.Errorf("%w: broker %d epoch %d", kerr.StaleBrokerEpoch, req.BrokerID, req.BrokerEpoch))
	}
	t, ok := s.topics[req.TopicID]
	if !ok {
		return fail(fmt.Errorf("%w: %s", kerr.UnknownTopicID, req.TopicID))
	}
	p := s.partition(req.TopicID, req.Partition)
	if p == nil {
		return fail(fmt.Errorf("%w: partition %d", kerr.UnknownTopicOrPartition, req.Partition))
	}
	current := AlterPartitionResult{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		ISR: slices.Clone(p.ISR), LeaderRecoveryState: p.LeaderRecoveryState}
	refuse := func(err error) ([]Record, AlterPartitionResult) {
		r := current
		r.Err = err
		return nil, r
	}
	switch {
	case req.LeaderEpoch > p.LeaderEpoch:
		return refuse(fmt.Errorf("%w: leader epoch %d ahead of %d", kerr.NotController, req.LeaderEpoch, p.LeaderEpoch))
	case req.PartitionEpoch > p.PartitionEpoch:
		return refuse(fmt.Errorf("%w: partition epoch %d ahead of %d", kerr.NotController, req.PartitionEpoch, p.PartitionEpoch))
	case req.LeaderEpoch < p.LeaderEpoch:
		return refuse(fmt.Errorf("%w: leader epoch %d, current %d", kerr.FencedLeaderEpoch, req.LeaderEpoch, p.LeaderEpoch))
	case req.BrokerID != p.Leader:
		return refuse(fmt.Errorf("%w: broker %d is not the leader (%d)", kerr.InvalidRequest, req.BrokerID, p.Leader))
	case req.PartitionEpoch < p.PartitionEpoch:
		return refuse(fmt.Errorf("%w: partition epoch %d, current %d", kerr.InvalidUpdateVersion, req.PartitionEpoch, p.PartitionEpoch))
	}
	isr, epochs := req.NewISR, map[int32]int64{}
	if req.NewISRWithEpochs != nil {
		isr = make([]int32, len(req.NewISRWithEpochs))
		for i, m := range req.NewISRWithEpochs {
			isr[i] = m.BrokerID
			epochs[m.BrokerID] = m.BrokerEpoch
		}
	}
	if len(isr) == 0 {
		return refuse(fmt.Errorf("%w: empty ISR", kerr.InvalidRequest))
	}
	if err := checkAssignment(p.Replicas, isr, p.Leader); err != nil {
		return refuse(fmt.Errorf("%w: %v", kerr.InvalidRequest, err))
	}
	switch req.LeaderRecoveryState {
	case LeaderRecovered:
	case LeaderRecovering:
		if p.LeaderRecoveryState == LeaderRecovered {
			return refuse(fmt.Errorf("%w: leader recovery state cannot go from RECOVERED to RECOVERING", kerr.InvalidRequest))
		}
		if len(isr) > 1 {
			return refuse(fmt.Errorf("%w: ISR %v has more than one member while the leader is RECOVERING", kerr.InvalidRequest, isr))
		}
	default:
		return refuse(fmt.Errorf("%w: leader recovery state %d", kerr.InvalidRequest, req.LeaderRecoveryState))
	}
	for _, r := range isr {
		b, ok := s.brokers[r]
		switch {
		case !ok:
			return refuse(fmt.Errorf("%w: broker %d is not registered", kerr.IneligibleReplica, r))
		case b.Fenced:
			return refuse(fmt.Errorf("%w: broker %d is fenced", kerr.IneligibleReplica, r))
		case b.InControlledShutdown:
			return refuse(fmt.Errorf("%w: broker %d is in controlled shutdown", kerr.IneligibleReplica, r))
		}
		if e, ok := epochs[r]; ok && e != -1 && e != b.Epoch {
			return refuse(fmt.Errorf("%w: broker %d epoch %d, registered %d", kerr.IneligibleReplica, r, e, b.Epoch))
		}
	}
	res := s.changePartition(t, p, isr, changeOpts{
		acceptable:      func(int32) bool { return true }, // the leader stays: it is in the ISR and checked above
		uncleanShutdown: NoLeader,
		recovered:       req.LeaderRecoveryState == LeaderRecovered,
	})
	if p.Reassigning() {
		// KIP-455: an ISR change may complete the reassignment.
		next := copyPartition(*p)
		next.ISR = isr
		if r := res.rec; r != nil {
			if r.ELR != nil {
				next.ELR = r.ELR
			}
			if r.LastKnownELR != nil {
				next.LastKnownELR = r.LastKnownELR
			}
			if r.LeaderRecoveryState != nil {
				next.LeaderRecoveryState = *r.LeaderRecoveryState
			}
		}
		if done := s.completeReassignment(p, &next); done != nil {
			out := current
			out.Leader, out.LeaderEpoch = *done.Leader, p.LeaderEpoch+1
			out.ISR = slices.Clone(done.ISR)
			out.PartitionEpoch++
			out.LeaderRecoveryState = next.LeaderRecoveryState
			return []Record{done}, out
		}
	}
	if res.rec == nil {
		return nil, current
	}
	out := current
	out.ISR = slices.Clone(isr)
	out.PartitionEpoch++
	if res.rec.LeaderRecoveryState != nil {
		out.LeaderRecoveryState = *res.rec.LeaderRecoveryState
	}
	return []Record{res.rec}, out
}
