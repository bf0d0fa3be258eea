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
// Errors: INVALID_REQUEST (bad state or description), UNKNOWN_TOPIC_ID,
// UNKNOWN_TOPIC_OR_PARTITION, and for an illegal transition
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
		if err := checkSegment(&rec); err != nil {
			return nil, fmt.Errorf("%w: segment %s: %v", kerr.InvalidRequest, rec.SegmentID, err)
		}
		out := rec
		out.LeaderEpochs = slices.Clone(rec.LeaderEpochs)
		return []Record{&out}, nil
	}
	if seg.State == rec.State {
		return nil, nil
	}
	if !remoteTransitionOK(true, seg.State, rec.State) {
		return nil, fmt.Errorf("%w: %w: segment %s cannot go from %s to %s", ErrIllegalSegmentTransition, kerr.InvalidRecordState, rec.SegmentID, seg.State, rec.State)
	}
	return []Record{&RemoteSegmentRecord{
		SegmentID: seg.SegmentID, TopicID: seg.TopicID, Partition: seg.Partition,
		BaseOffset: seg.BaseOffset, EndOffset: seg.EndOffset, MaxTimestamp: seg.MaxTimestamp,
		LeaderEpochs: slices.Clone(seg.LeaderEpochs), SizeBytes: seg.SizeBytes,
		State: rec.State, BrokerID: rec.BrokerID, EventTimestamp: rec.EventTimestamp,
	}}, nil
}
