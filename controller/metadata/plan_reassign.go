package metadata

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Partition reassignment (KIP-455), as Kafka's ReplicationControlManager
// and PartitionReassignmentReplicas do it.
//
// A reassignment of a partition with replicas R to a target T makes the
// replicas R' = T ∪ R (T's order first, then R's others), with
// adding = T − R and removing = R − T. The adding replicas create their
// logs and fetch from the leader as followers; the leader treats them as
// replicas and adds them to the ISR once caught up. As soon as every adding
// replica is in the ISR (checked at request time and on every ISR change)
// the reassignment completes in one record: replicas = T, ISR = ISR ∩ T,
// ELR and last known ELR kept to T, adding and removing cleared, and the
// leader epoch bumped (so the removed replicas' fetches are fenced); a
// leader outside T is replaced by the first of T in the new ISR that may
// lead. It does not complete while ISR ∩ T would be empty.
//
// A new reassignment replaces one in progress: it starts from the current
// (union) replicas. Cancelling reverts to the original replicas
// (R' − adding), dropping the adding replicas from the ISR.

// ReassignmentRequest asks for one partition's reassignment. Replicas nil
// cancels the reassignment in progress.
type ReassignmentRequest struct {
	Topic     string
	Partition int32
	Replicas  []int32
	// KeepReplicationFactor is AlterPartitionReassignments v1's
	// AllowReplicationFactorChange=false (KIP-860): a target whose size
	// is not the original replica count is refused.
	KeepReplicationFactor bool `json:",omitempty"`
}

// ReassignmentResult is a [ReassignmentRequest]'s outcome.
type ReassignmentResult struct {
	Topic     string
	Partition int32
	Err       error
}

// ListReassignmentsRequest names partitions; nil Topics lists every
// partition with a reassignment in progress.
type ListReassignmentsRequest struct {
	Topics []ListReassignmentsTopic
}

// ListReassignmentsTopic is one topic of a [ListReassignmentsRequest].
type ListReassignmentsTopic struct {
	Name       string
	Partitions []int32
}

// OngoingReassignment is one partition's reassignment in progress.
type OngoingReassignment struct {
	Topic            string
	Partition        int32
	Replicas         []int32
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// PlanReassignments plans each request of reqs in order, each seeing the
// ones before it (a partition named twice takes the last). Errors per
// partition: UNKNOWN_TOPIC_OR_PARTITION; INVALID_REPLICA_ASSIGNMENT for an
// empty target, a repeated broker, or a broker that is not registered or
// is fenced, or a cancel that would leave no ISR; NO_REASSIGNMENT_IN_PROGRESS
// for a cancel without one; INVALID_REPLICATION_FACTOR for a target of
// another size than the original replicas with KeepReplicationFactor.
func (s *State) PlanReassignments(reqs []ReassignmentRequest) ([]Record, []ReassignmentResult) {
	work := s
	if len(reqs) > 1 {
		work = s.Clone()
	}
	var recs []Record
	out := make([]ReassignmentResult, len(reqs))
	for i, req := range reqs {
		out[i] = ReassignmentResult{Topic: req.Topic, Partition: req.Partition}
		rec, err := work.planReassignment(req)
		out[i].Err = err
		if err != nil || rec == nil {
			continue
		}
		if work != s {
			if err := work.Apply(work.Offset()+1, rec); err != nil {
				out[i].Err = fmt.Errorf("%w: %v", kerr.UnknownServerError, err)
				continue
			}
		}
		recs = append(recs, rec)
	}
	return recs, out
}

func (s *State) planReassignment(req ReassignmentRequest) (Record, error) {
	id, ok := s.topicsByName[req.Topic]
	if !ok {
		return nil, fmt.Errorf("%w: topic %q", kerr.UnknownTopicOrPartition, req.Topic)
	}
	t := s.topics[id]
	p := s.partition(id, req.Partition)
	if p == nil {
		return nil, fmt.Errorf("%w: %s-%d", kerr.UnknownTopicOrPartition, req.Topic, req.Partition)
	}
	if req.Replicas == nil {
		return s.planCancelReassignment(t, p)
	}
	target := req.Replicas
	if len(target) == 0 {
		return nil, fmt.Errorf("%w: the replica assignment is empty", kerr.InvalidReplicaAssignment)
	}
	for i, r := range target {
		if slices.Contains(target[:i], r) {
			return nil, fmt.Errorf("%w: broker %d appears more than once", kerr.InvalidReplicaAssignment, r)
		}
		b, ok := s.brokers[r]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: broker %d is not registered", kerr.InvalidReplicaAssignment, r)
		case b.Fenced:
			return nil, fmt.Errorf("%w: broker %d is fenced", kerr.InvalidReplicaAssignment, r)
		}
	}
	if req.KeepReplicationFactor {
		original := len(p.Replicas) - len(p.AddingReplicas)
		if len(target) != original {
			return nil, fmt.Errorf("%w: the replication factor would change from %d to %d", kerr.InvalidReplicationFactor, original, len(target))
		}
	}
	replicas := slices.Clone(target)
	var adding, removing []int32
	for _, r := range target {
		if !slices.Contains(p.Replicas, r) {
			adding = append(adding, r)
		}
	}
	for _, r := range p.Replicas {
		if !slices.Contains(target, r) {
			removing = append(removing, r)
			replicas = append(replicas, r)
		}
	}
	next := copyPartition(*p)
	next.Replicas, next.AddingReplicas, next.RemovingReplicas = replicas, adding, removing
	if rec := s.completeReassignment(p, &next); rec != nil {
		return rec, nil
	}
	if slices.Equal(replicas, p.Replicas) && slices.Equal(adding, p.AddingReplicas) && slices.Equal(removing, p.RemovingReplicas) {
		return nil, nil // nothing changes
	}
	return &PartitionChangeRecord{TopicID: p.TopicID, Partition: p.Partition, Replicas: replicas,
		AddingReplicas: nonNil(adding), RemovingReplicas: nonNil(removing)}, nil
}

// planCancelReassignment reverts p to its original replicas (Kafka's
// PartitionReassignmentRevert): adding replicas leave the replicas, ISR and
// ELR. A revert that would leave the ISR empty needs an unclean election
// and is refused, as Kafka refuses it without unclean.leader.election.enable.
func (s *State) planCancelReassignment(t *topicState, p *PartitionInfo) (Record, error) {
	if !p.Reassigning() {
		return nil, fmt.Errorf("%w: %s-%d", kerr.NoReassignmentInProgress, t.name, p.Partition)
	}
	drop := func(v []int32) []int32 {
		return slices.DeleteFunc(slices.Clone(v), func(r int32) bool { return slices.Contains(p.AddingReplicas, r) })
	}
	replicas, isr := drop(p.Replicas), drop(p.ISR)
	if len(isr) == 0 {
		return nil, fmt.Errorf("%w: cancelling the reassignment of %s-%d would need an unclean leader election", kerr.InvalidReplicaAssignment, t.name, p.Partition)
	}
	rec := &PartitionChangeRecord{TopicID: p.TopicID, Partition: p.Partition, Replicas: replicas,
		AddingReplicas: []int32{}, RemovingReplicas: []int32{}}
	if !slices.Equal(isr, p.ISR) {
		rec.ISR = isr
	}
	if elr := drop(p.ELR); !slices.Equal(elr, p.ELR) {
		rec.ELR = nonNil(elr)
	}
	if lk := drop(p.LastKnownELR); !slices.Equal(lk, p.LastKnownELR) {
		rec.LastKnownELR = nonNil(lk)
	}
	if !slices.Contains(isr, p.Leader) {
		leader, _ := firstIn(replicas, func(r int32) bool { return slices.Contains(isr, r) && s.eligible(r, -1) })
		rec.Leader = ptr(leader)
	}
	return rec, nil
}

// completeReassignment returns the record that completes next's
// reassignment, or nil when it is not complete: next is p as it will be
// (replicas, ISR, adding, removing, ELR) once the change in hand applies.
// The record carries every field it sets, so it replaces that change.
func (s *State) completeReassignment(p *PartitionInfo, next *PartitionInfo) *PartitionChangeRecord {
	if !next.Reassigning() {
		return nil
	}
	for _, r := range next.AddingReplicas {
		if !slices.Contains(next.ISR, r) {
			return nil
		}
	}
	keep := func(v []int32) []int32 {
		return slices.DeleteFunc(slices.Clone(v), func(r int32) bool { return slices.Contains(next.RemovingReplicas, r) })
	}
	target, isr := keep(next.Replicas), keep(next.ISR)
	if len(isr) == 0 {
		return nil
	}
	leader := next.Leader
	if !slices.Contains(isr, leader) || !s.eligible(leader, -1) {
		leader, _ = firstIn(target, func(r int32) bool { return slices.Contains(isr, r) && s.eligible(r, -1) })
	}
	rec := &PartitionChangeRecord{TopicID: p.TopicID, Partition: p.Partition,
		Leader: ptr(leader), ISR: nonNil(isr), Replicas: target,
		AddingReplicas: []int32{}, RemovingReplicas: []int32{}}
	if elr := keep(next.ELR); !slices.Equal(elr, p.ELR) {
		rec.ELR = nonNil(elr)
	}
	if lk := keep(next.LastKnownELR); !slices.Equal(lk, p.LastKnownELR) {
		rec.LastKnownELR = nonNil(lk)
	}
	if next.LeaderRecoveryState != p.LeaderRecoveryState {
		rec.LeaderRecoveryState = ptr(next.LeaderRecoveryState)
	}
	return rec
}

// ListReassignments returns the reassignments in progress, of the named
// partitions (unknown ones and those without one are left out, as Kafka
// does) or, for nil Topics, of every partition, by topic name then
// partition.
func (s *State) ListReassignments(req ListReassignmentsRequest) []OngoingReassignment {
	var out []OngoingReassignment
	add := func(name string, p *PartitionInfo) {
		if p != nil && p.Reassigning() {
			out = append(out, OngoingReassignment{Topic: name, Partition: p.Partition, Replicas: slices.Clone(p.Replicas),
				AddingReplicas: slices.Clone(p.AddingReplicas), RemovingReplicas: slices.Clone(p.RemovingReplicas)})
		}
	}
	if req.Topics == nil {
		s.eachPartition(func(t *topicState, p *PartitionInfo) { add(t.name, p) })
		return out
	}
	for _, rt := range req.Topics {
		id, ok := s.topicsByName[rt.Name]
		if !ok {
			continue
		}
		for _, pn := range rt.Partitions {
			add(rt.Name, s.partition(id, pn))
		}
	}
	return out
}
