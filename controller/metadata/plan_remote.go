package metadata

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// PlanRemoteSegment decides a remote-segment state change. The legal
// transitions (see [RemoteSegmentState]) are:
//
//	(none)         → COPY_STARTED
//	COPY_STARTED   → COPY_FINISHED | DELETE_STARTED
//	COPY_FINISHED  → DELETE_STARTED
//	DELETE_STARTED → DELETE_FINISHED   (the segment then leaves the image)
//
// Repeating a segment's current state plans nothing and succeeds
// (idempotent retries); so does DELETE_FINISHED for a segment the image no
// longer holds, since that is what a retried DELETE_FINISHED looks like.
// A new segment (COPY_STARTED) must belong to an existing partition and
// have a sane description (offsets, size, increasing leader epochs inside
// the segment). Later records keep the description of the first and take
// only State, BrokerID and EventTimestamp from rec; the planned record
// carries the full description so that log followers see it whole.
//
// Leadership fence: COPY_STARTED, COPY_FINISHED and DELETE_STARTED change
// what the remote tier holds, so only the partition's current leader may
// record them, under its current leader epoch (rec.BrokerID,
// rec.WriterLeaderEpoch): a deposed leader that still believes it leads
// (paused, or cut off from the metadata stream but not from the
// controller) would otherwise register a segment overlapping the new
// leader's, with other bytes, or delete by its stale retention. Kafka's
// RLMM carries the leader epoch in each segment's metadata and has readers
// follow the epoch lineage; the controller here refuses the write instead.
// The checks, in AlterPartition's order ([State.PlanAlterPartition]): an
// epoch ahead of the image's → NOT_CONTROLLER (this controller is behind;
// retriable), an older epoch → FENCED_LEADER_EPOCH, a broker other than the
// leader → NOT_LEADER_OR_FOLLOWER. A repeat of COPY_STARTED is fenced
// too, though it changes nothing: it is the uploader's fence probe before
// it writes the bucket's manifest (a zombie whose image is stale would
// otherwise rewrite the new leader's manifest). Not fenced:
//
//   - a repeat of COPY_FINISHED or DELETE_STARTED (it changes nothing,
//     and a retry whose acknowledgement was lost must still succeed after
//     a leader change: the writer learns the step did happen; a writer
//     told FENCED at COPY_FINISHED deletes its objects, so it must mean
//     "not committed");
//   - DELETE_FINISHED (after DELETE_STARTED the objects are going anyway;
//     whoever finishes, the end is the same);
//   - a segment of a deleted topic (no partition, no leader: the
//     deleted-topics janitor cleans up);
//   - WriterLeaderEpoch [UnknownLeaderEpoch]: a restore from the bucket
//     (tiering.RestoreRecords, any broker, before the partition serves),
//     the janitor, and version 0 records.
//
// Errors: INVALID_REQUEST (bad state or description), UNKNOWN_TOPIC_ID,
// UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER
// (code 6, franz-go's kerr.NotLeaderForPartition),
// NOT_CONTROLLER, and for an illegal transition
// [ErrIllegalSegmentTransition] together with INVALID_RECORD_STATE.
func (s *State) PlanRemoteSegment(rec RemoteSegmentRecord) ([]Record, error) {
	if rec.State > DeleteFinished {
		return nil, fmt.Errorf("%w: segment state %d", kerr.InvalidRequest, rec.State)
	}
	seg, exists := s.remote[TopicPartition{rec.TopicID, rec.Partition}][rec.SegmentID]
	if !exists {
		switch rec.State {
		case DeleteFinished:
			return nil, nil
		case CopyStarted:
		default:
			return nil, fmt.Errorf("%w: %w: segment %s unknown, cannot become %s", ErrIllegalSegmentTransition, kerr.InvalidRecordState, rec.SegmentID, rec.State)
		}
		if _, ok := s.topics[rec.TopicID]; !ok {
			return nil, fmt.Errorf("%w: %s", kerr.UnknownTopicID, rec.TopicID)
		}
		if s.partition(rec.TopicID, rec.Partition) == nil {
			return nil, fmt.Errorf("%w: partition %d", kerr.UnknownTopicOrPartition, rec.Partition)
		}
		if err := s.fenceSegmentWriter(&rec); err != nil {
			return nil, err
		}
		if err := checkSegment(&rec); err != nil {
			return nil, fmt.Errorf("%w: segment %s: %v", kerr.InvalidRequest, rec.SegmentID, err)
		}
		out := rec
		out.LeaderEpochs = slices.Clone(rec.LeaderEpochs)
		return []Record{&out}, nil
	}
	if seg.State == rec.State {
		if rec.State == CopyStarted {
			return nil, s.fenceSegmentWriter(&rec)
		}
		return nil, nil
	}
	if rec.State != DeleteFinished {
		if err := s.fenceSegmentWriter(&rec); err != nil {
			return nil, err
		}
	}
	if !remoteTransitionOK(true, seg.State, rec.State) {
		return nil, fmt.Errorf("%w: %w: segment %s cannot go from %s to %s", ErrIllegalSegmentTransition, kerr.InvalidRecordState, rec.SegmentID, seg.State, rec.State)
	}
	return []Record{&RemoteSegmentRecord{
		SegmentID: seg.SegmentID, TopicID: seg.TopicID, Partition: seg.Partition,
		BaseOffset: seg.BaseOffset, EndOffset: seg.EndOffset, MaxTimestamp: seg.MaxTimestamp,
		LeaderEpochs: slices.Clone(seg.LeaderEpochs), SizeBytes: seg.SizeBytes,
		State: rec.State, BrokerID: rec.BrokerID, EventTimestamp: rec.EventTimestamp,
		WriterLeaderEpoch: rec.WriterLeaderEpoch,
	}}, nil
}

// fenceSegmentWriter refuses rec unless its writer is the partition's
// current leader under the current leader epoch (see PlanRemoteSegment).
// A partition the image no longer has (a deleted topic) is not fenced.
func (s *State) fenceSegmentWriter(rec *RemoteSegmentRecord) error {
	if rec.WriterLeaderEpoch == UnknownLeaderEpoch {
		return nil
	}
	p := s.partition(rec.TopicID, rec.Partition)
	if p == nil {
		return nil
	}
	switch {
	case rec.WriterLeaderEpoch > p.LeaderEpoch:
		return fmt.Errorf("%w: segment %s: leader epoch %d ahead of %d", kerr.NotController, rec.SegmentID, rec.WriterLeaderEpoch, p.LeaderEpoch)
	case rec.WriterLeaderEpoch < p.LeaderEpoch:
		return fmt.Errorf("%w: segment %s: broker %d acts under leader epoch %d, current %d", kerr.FencedLeaderEpoch, rec.SegmentID, rec.BrokerID, rec.WriterLeaderEpoch, p.LeaderEpoch)
	case rec.BrokerID != p.Leader:
		return fmt.Errorf("%w: segment %s: broker %d is not the leader (%d) in epoch %d", kerr.NotLeaderForPartition, rec.SegmentID, rec.BrokerID, p.Leader, p.LeaderEpoch)
	}
	return nil
}
