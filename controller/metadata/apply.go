package metadata

// Apply: the pure fold of one record into the image (no clock, no
// randomness, no map-order dependence), with the consistency checks that
// refuse a record contradicting the image (ErrInconsistentRecord). The
// image's types and read accessors are in state.go; the planners that
// produce the records are plan_*.go.

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/google/uuid"
)

// applyClusterID records the cluster id once; repeating it is a no-op.
func (s *State) applyClusterID(r *ClusterIDRecord) error {
	if err := validClusterID(r.ClusterID); err != nil {
		return inconsistent("cluster id: %v", err)
	}
	if s.clusterID != "" && s.clusterID != r.ClusterID {
		return inconsistent("cluster id %q, already %q", r.ClusterID, s.clusterID)
	}
	s.clusterID = r.ClusterID
	return nil
}

// Apply folds the record at offset into the image. It is a pure function of
// (state, offset, record): no clock, no randomness, no map-order dependence.
// A record that contradicts the image returns [ErrInconsistentRecord]
// (wrapped) and leaves the state, including Offset, unchanged. The record is
// not retained: Apply copies what it keeps.
func (s *State) Apply(offset int64, r Record) error {
	if offset <= s.offset {
		return fmt.Errorf("%w: %d <= %d", ErrOffsetRegression, offset, s.offset)
	}
	var err error
	switch r := r.(type) {
	case *RegisterBrokerRecord:
		err = s.applyRegisterBroker(offset, r)
	case *UnregisterBrokerRecord:
		err = s.applyUnregisterBroker(r)
	case *BrokerRegistrationChangeRecord:
		err = s.applyBrokerChange(r)
	case *TopicRecord:
		err = s.applyTopic(r)
	case *PartitionRecord:
		err = s.applyPartition(r)
	case *PartitionChangeRecord:
		err = s.applyPartitionChange(r)
	case *ConfigRecord:
		err = s.applyConfig(r)
	case *RemoveTopicRecord:
		err = s.applyRemoveTopic(r)
	case *RemoteSegmentRecord:
		err = s.applyRemoteSegment(r)
	case *NoOpRecord:
	case *ClusterIDRecord:
		err = s.applyClusterID(r)
	case *AccessControlEntryRecord:
		err = s.applyACL(r)
	case *RemoveAccessControlEntryRecord:
		err = s.applyRemoveACL(r)
	case *UserScramCredentialRecord:
		err = s.applyScram(r)
	case *RemoveUserScramCredentialRecord:
		err = s.applyRemoveScram(r)
	case *ClientQuotaRecord:
		err = s.applyClientQuota(r)
	case *FeatureLevelRecord:
		if r.Level < 0 {
			err = inconsistent("feature %q level %d", r.Name, r.Level)
		} else if r.Level == 0 {
			delete(s.features, r.Name)
		} else {
			s.features[r.Name] = r.Level
		}
	default:
		err = inconsistent("foreign record type %T", r)
	}
	if err != nil {
		return err
	}
	s.offset = offset
	return nil
}

func inconsistent(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInconsistentRecord, fmt.Sprintf(format, args...))
}

func (s *State) applyRegisterBroker(offset int64, r *RegisterBrokerRecord) error {
	if r.BrokerID < 0 {
		return inconsistent("broker id %d", r.BrokerID)
	}
	if old, ok := s.brokers[r.BrokerID]; ok && r.BrokerEpoch <= old.Epoch {
		return inconsistent("broker %d epoch %d not above current %d", r.BrokerID, r.BrokerEpoch, old.Epoch)
	}
	s.brokers[r.BrokerID] = &BrokerInfo{
		ID:                 r.BrokerID,
		IncarnationID:      r.IncarnationID,
		Epoch:              r.BrokerEpoch,
		Listeners:          slices.Clone(r.Listeners),
		Rack:               r.Rack,
		Fenced:             r.Fenced,
		RegistrationOffset: offset,
	}
	s.maxBrokerEpoch = max(s.maxBrokerEpoch, r.BrokerEpoch)
	return nil
}

func (s *State) registered(id int32, epoch int64) (*BrokerInfo, error) {
	b, ok := s.brokers[id]
	if !ok {
		return nil, inconsistent("broker %d not registered", id)
	}
	if b.Epoch != epoch {
		return nil, inconsistent("broker %d epoch %d, current %d", id, epoch, b.Epoch)
	}
	return b, nil
}

func (s *State) applyUnregisterBroker(r *UnregisterBrokerRecord) error {
	if _, err := s.registered(r.BrokerID, r.BrokerEpoch); err != nil {
		return err
	}
	delete(s.brokers, r.BrokerID)
	return nil
}

func (s *State) applyBrokerChange(r *BrokerRegistrationChangeRecord) error {
	b, err := s.registered(r.BrokerID, r.BrokerEpoch)
	if err != nil {
		return err
	}
	if r.Fenced != nil {
		b.Fenced = *r.Fenced
	}
	if r.InControlledShutdown != nil {
		b.InControlledShutdown = *r.InControlledShutdown
	}
	return nil
}

func (s *State) applyTopic(r *TopicRecord) error {
	if err := validTopicName(r.Name); err != nil {
		return inconsistent("%v", err)
	}
	if r.TopicID == uuid.Nil {
		return inconsistent("topic %q has the nil topic ID", r.Name)
	}
	if _, ok := s.topicsByName[r.Name]; ok {
		return inconsistent("topic %q exists", r.Name)
	}
	if _, ok := s.topics[r.TopicID]; ok {
		return inconsistent("topic ID %s exists", r.TopicID)
	}
	if s.hasRemote(r.TopicID) {
		// A removed topic's segments are still being deleted under this
		// ID; a new topic would inherit them.
		return inconsistent("topic ID %s has remote segments of a removed topic", r.TopicID)
	}
	s.topics[r.TopicID] = &topicState{name: r.Name, id: r.TopicID}
	s.topicsByName[r.Name] = r.TopicID
	return nil
}

// checkAssignment validates a partition's replicas, ISR and leader.
func checkAssignment(replicas, isr []int32, leader int32) error {
	if len(replicas) == 0 {
		return errors.New("no replicas")
	}
	for i, r := range replicas {
		if r < 0 {
			return fmt.Errorf("replica id %d", r)
		}
		if slices.Contains(replicas[:i], r) {
			return fmt.Errorf("duplicate replica %d", r)
		}
	}
	for i, r := range isr {
		if !slices.Contains(replicas, r) {
			return fmt.Errorf("ISR member %d not a replica", r)
		}
		if slices.Contains(isr[:i], r) {
			return fmt.Errorf("duplicate ISR member %d", r)
		}
	}
	if leader != NoLeader && !slices.Contains(isr, leader) {
		return fmt.Errorf("leader %d not in ISR", leader)
	}
	return nil
}

func (s *State) applyPartition(r *PartitionRecord) error {
	t, ok := s.topics[r.TopicID]
	if !ok {
		return inconsistent("partition of unknown topic %s", r.TopicID)
	}
	if int(r.Partition) != len(t.partitions) {
		return inconsistent("topic %q partition %d, next is %d", t.name, r.Partition, len(t.partitions))
	}
	if err := checkAssignment(r.Replicas, r.ISR, r.Leader); err != nil {
		return inconsistent("topic %q partition %d: %v", t.name, r.Partition, err)
	}
	if r.LeaderEpoch < 0 || r.PartitionEpoch < 0 {
		return inconsistent("topic %q partition %d: negative epoch", t.name, r.Partition)
	}
	if err := checkELR(r.Replicas, r.ISR, r.ELR, r.LastKnownELR, r.LeaderRecoveryState); err != nil {
		return inconsistent("topic %q partition %d: %v", t.name, r.Partition, err)
	}
	if err := checkReassignment(r.Replicas, r.AddingReplicas, r.RemovingReplicas); err != nil {
		return inconsistent("topic %q partition %d: %v", t.name, r.Partition, err)
	}
	t.partitions = append(t.partitions, &PartitionInfo{
		TopicID:             r.TopicID,
		Partition:           r.Partition,
		Replicas:            slices.Clone(r.Replicas),
		ISR:                 nonNil(slices.Clone(r.ISR)),
		Leader:              r.Leader,
		LeaderEpoch:         r.LeaderEpoch,
		PartitionEpoch:      r.PartitionEpoch,
		ELR:                 nilIfEmpty(slices.Clone(r.ELR)),
		LastKnownELR:        nilIfEmpty(slices.Clone(r.LastKnownELR)),
		LeaderRecoveryState: r.LeaderRecoveryState,
		AddingReplicas:      nilIfEmpty(slices.Clone(r.AddingReplicas)),
		RemovingReplicas:    nilIfEmpty(slices.Clone(r.RemovingReplicas)),
	})
	return nil
}

// checkReassignment validates KIP-455's adding and removing replicas:
// disjoint replicas without repeats, and not every replica removed.
func checkReassignment(replicas, adding, removing []int32) error {
	for i, r := range adding {
		if !slices.Contains(replicas, r) || slices.Contains(adding[:i], r) || slices.Contains(removing, r) {
			return fmt.Errorf("adding replica %d is not a replica, repeated, or also removing", r)
		}
	}
	for i, r := range removing {
		if !slices.Contains(replicas, r) || slices.Contains(removing[:i], r) {
			return fmt.Errorf("removing replica %d is not a replica, or repeated", r)
		}
	}
	if len(removing) > 0 && len(removing) >= len(replicas) {
		return fmt.Errorf("every replica of %v is removing", replicas)
	}
	return nil
}

// checkELR validates a partition's KIP-966 and KIP-704 fields against its
// replicas and ISR: ELR members are replicas outside the ISR, without
// repeats; last known ELR members are replicas, without repeats; the
// recovery state is known, and a RECOVERING partition has at most one ISR
// member (the unclean leader, until it reports RECOVERED).
func checkELR(replicas, isr, elr, lastKnown []int32, lrs int8) error {
	for i, r := range elr {
		if !slices.Contains(replicas, r) || slices.Contains(isr, r) || slices.Contains(elr[:i], r) {
			return fmt.Errorf("ELR member %d is not a replica outside the ISR, or repeated", r)
		}
	}
	for i, r := range lastKnown {
		if !slices.Contains(replicas, r) || slices.Contains(lastKnown[:i], r) {
			return fmt.Errorf("last known ELR member %d is not a replica, or repeated", r)
		}
	}
	switch lrs {
	case LeaderRecovered:
	case LeaderRecovering:
		if len(isr) > 1 {
			return fmt.Errorf("ISR %v while the leader is RECOVERING", isr)
		}
	default:
		return fmt.Errorf("leader recovery state %d", lrs)
	}
	return nil
}

func nonNil(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}

func (s *State) applyPartitionChange(r *PartitionChangeRecord) error {
	p := s.partition(r.TopicID, r.Partition)
	if p == nil {
		return inconsistent("change of unknown partition %s/%d", r.TopicID, r.Partition)
	}
	replicas, isr, leader := p.Replicas, p.ISR, p.Leader
	elr, lastKnown, lrs := p.ELR, p.LastKnownELR, p.LeaderRecoveryState
	if r.Replicas != nil {
		replicas = r.Replicas
	}
	if r.ISR != nil {
		isr = r.ISR
	}
	if r.Leader != nil {
		leader = *r.Leader
	}
	if r.ELR != nil {
		elr = r.ELR
	}
	if r.LastKnownELR != nil {
		lastKnown = r.LastKnownELR
	}
	if r.LeaderRecoveryState != nil {
		lrs = *r.LeaderRecoveryState
	}
	adding, removing := p.AddingReplicas, p.RemovingReplicas
	if r.AddingReplicas != nil {
		adding = r.AddingReplicas
	}
	if r.RemovingReplicas != nil {
		removing = r.RemovingReplicas
	}
	if err := checkReassignment(replicas, adding, removing); err != nil {
		return inconsistent("partition %s/%d: %v", r.TopicID, r.Partition, err)
	}
	if err := checkAssignment(replicas, isr, leader); err != nil {
		return inconsistent("partition %s/%d: %v", r.TopicID, r.Partition, err)
	}
	if err := checkELR(replicas, isr, elr, lastKnown, lrs); err != nil {
		return inconsistent("partition %s/%d: %v", r.TopicID, r.Partition, err)
	}
	p.Replicas = slices.Clone(replicas)
	p.ISR = nonNil(slices.Clone(isr))
	p.ELR = nilIfEmpty(slices.Clone(elr))
	p.LastKnownELR = nilIfEmpty(slices.Clone(lastKnown))
	p.LeaderRecoveryState = lrs
	p.AddingReplicas = nilIfEmpty(slices.Clone(adding))
	p.RemovingReplicas = nilIfEmpty(slices.Clone(removing))
	if r.Leader != nil {
		p.Leader = leader
		p.LeaderEpoch++
	}
	p.PartitionEpoch++
	return nil
}

func (s *State) applyConfig(r *ConfigRecord) error {
	switch r.ResourceType {
	case ResourceTopic:
		if _, ok := s.topicsByName[r.ResourceName]; !ok {
			return inconsistent("config of unknown topic %q", r.ResourceName)
		}
	case ResourceBroker:
		if r.ResourceName != "" {
			if id, err := strconv.ParseInt(r.ResourceName, 10, 32); err != nil || id < 0 || strconv.FormatInt(id, 10) != r.ResourceName {
				return inconsistent("broker config resource %q", r.ResourceName)
			}
		}
	case ResourceGroup:
		if r.ResourceName == "" {
			return inconsistent("group config of an empty group id")
		}
	default:
		return inconsistent("resource type %d", r.ResourceType)
	}
	if r.Name == "" {
		return inconsistent("empty config name")
	}
	k := configKey{r.ResourceType, r.ResourceName}
	if r.Value == nil {
		if m := s.configs[k]; m != nil {
			delete(m, r.Name)
			if len(m) == 0 {
				delete(s.configs, k)
			}
		}
		return nil
	}
	m := s.configs[k]
	if m == nil {
		m = map[string]string{}
		s.configs[k] = m
	}
	m[r.Name] = *r.Value
	return nil
}

func (s *State) applyRemoveTopic(r *RemoveTopicRecord) error {
	t, ok := s.topics[r.TopicID]
	if !ok {
		return inconsistent("removal of unknown topic %s", r.TopicID)
	}
	delete(s.topics, r.TopicID)
	delete(s.topicsByName, t.name)
	delete(s.configs, configKey{ResourceTopic, t.name})
	// Remote segments stay, and with them the name their object keys
	// carry: see RemoveTopicRecord.
	if s.hasRemote(r.TopicID) {
		s.removedNames[r.TopicID] = t.name
	}
	return nil
}

// remoteTransitionOK reports whether a segment may move from 'from' to 'to'
// (from is ignored when exists is false).
func remoteTransitionOK(exists bool, from, to RemoteSegmentState) bool {
	if !exists {
		return to == CopyStarted
	}
	if from == to {
		return true
	}
	switch from {
	case CopyStarted:
		return to == CopyFinished || to == DeleteStarted
	case CopyFinished:
		return to == DeleteStarted
	case DeleteStarted:
		return to == DeleteFinished
	}
	return false
}

func (s *State) applyRemoteSegment(r *RemoteSegmentRecord) error {
	tp := TopicPartition{r.TopicID, r.Partition}
	seg, exists := s.remote[tp][r.SegmentID]
	var from RemoteSegmentState
	if exists {
		from = seg.State
	}
	if !remoteTransitionOK(exists, from, r.State) {
		if !exists {
			return inconsistent("segment %s unknown, cannot become %s", r.SegmentID, r.State)
		}
		return inconsistent("segment %s cannot go from %s to %s", r.SegmentID, from, r.State)
	}
	if !exists {
		if err := checkSegment(r); err != nil {
			return inconsistent("segment %s: %v", r.SegmentID, err)
		}
		if s.partition(r.TopicID, r.Partition) == nil {
			return inconsistent("segment %s of unknown partition %s/%d", r.SegmentID, r.TopicID, r.Partition)
		}
		m := s.remote[tp]
		if m == nil {
			m = map[uuid.UUID]*RemoteSegmentInfo{}
			s.remote[tp] = m
			s.remoteTopics[tp.TopicID]++
		}
		m[r.SegmentID] = &RemoteSegmentInfo{
			SegmentID: r.SegmentID, TopicID: r.TopicID, Partition: r.Partition,
			BaseOffset: r.BaseOffset, EndOffset: r.EndOffset, MaxTimestamp: r.MaxTimestamp,
			LeaderEpochs: slices.Clone(r.LeaderEpochs), SizeBytes: r.SizeBytes,
			State: r.State, BrokerID: r.BrokerID, EventTimestamp: r.EventTimestamp,
		}
		return nil
	}
	if r.State == DeleteFinished {
		delete(s.remote[tp], r.SegmentID)
		if len(s.remote[tp]) == 0 {
			delete(s.remote, tp)
			if s.remoteTopics[tp.TopicID]--; s.remoteTopics[tp.TopicID] == 0 {
				delete(s.remoteTopics, tp.TopicID)
				delete(s.removedNames, tp.TopicID) // its last object is gone
			}
		}
		return nil
	}
	seg.State = r.State
	seg.BrokerID = r.BrokerID
	seg.EventTimestamp = r.EventTimestamp
	return nil
}

// checkSegment validates a new segment's description.
func checkSegment(r *RemoteSegmentRecord) error {
	if r.SegmentID == uuid.Nil {
		return errors.New("nil segment id")
	}
	if r.BaseOffset < 0 || r.EndOffset < r.BaseOffset {
		return fmt.Errorf("offsets [%d, %d]", r.BaseOffset, r.EndOffset)
	}
	if r.SizeBytes < 0 {
		return fmt.Errorf("size %d", r.SizeBytes)
	}
	for i, e := range r.LeaderEpochs {
		if e.StartOffset < r.BaseOffset || e.StartOffset > r.EndOffset {
			return fmt.Errorf("epoch %d starts at %d outside the segment", e.Epoch, e.StartOffset)
		}
		if i > 0 && (e.Epoch <= r.LeaderEpochs[i-1].Epoch || e.StartOffset < r.LeaderEpochs[i-1].StartOffset) {
			return errors.New("leader epochs not increasing")
		}
	}
	return nil
}

// ApplyBatch applies the records of one log entry, all at offset, in order.
// Records that contradict the image are refused one by one (the others
// still apply) and their errors are joined into the result; the offset
// advances regardless, so a refusal is never retried. Refusal is
// deterministic, so every replica ends in the same state. A batch planned
// against the state it is applied to is never refused.
func (s *State) ApplyBatch(offset int64, recs []Record) error {
	if offset <= s.offset {
		return fmt.Errorf("%w: %d <= %d", ErrOffsetRegression, offset, s.offset)
	}
	var errs []error
	for i, r := range recs {
		// Apply requires a rising offset; the batch shares one, so step
		// the recorded offset back for each record.
		s.offset = offset - 1
		if err := s.Apply(offset, r); err != nil {
			errs = append(errs, fmt.Errorf("record %d: %w", i, err))
		}
	}
	s.offset = offset
	return errors.Join(errs...)
}
