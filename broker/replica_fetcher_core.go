package broker

// The replica fetcher's decisions, as pure functions of what the follower
// has and what the leader answered (table tests in
// replica_fetcher_core_test.go); replica_fetcher.go does the I/O around
// them.

import (
	"errors"
	"fmt"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/checkpoint"
)

// divergenceTruncation is where a follower truncates when the leader
// answers DivergingEpoch{epoch, endOffset} (Kafka's
// AbstractFetcherThread.getOffsetTruncationState, REPLICATION.md §1.8).
// localEndFor is the local leader-epoch cache's EndOffsetFor: the largest
// local epoch at or below the asked one and where it ends.
//
//   - the follower knows the epoch: min(leader's end, our end for it, LEO);
//     truncation is complete;
//   - it knows only smaller epochs: our end of the largest of them; not
//     complete: the next fetch's LastFetchedEpoch is that smaller epoch,
//     and the leader answers again for it (KIP-279's multi-round step);
//   - it knows none at or below (an empty cache), or the leader's epoch is
//     undefined: min(leader's end, LEO).
//
// An undefined leader end offset never truncates: Kafka would fall back to
// the high watermark there, which is the unsafe pre-KIP-101 rule; a leader
// that does not know the epoch answers OFFSET_OUT_OF_RANGE instead.
func divergenceTruncation(leaderEpoch int32, leaderEnd, leo int64, localEndFor func(epoch int32, leo int64) (int32, int64)) (offset int64, complete bool) {
	if leaderEnd < 0 {
		return leo, false
	}
	if leaderEpoch < 0 {
		return min(leaderEnd, leo), true
	}
	e, end := localEndFor(leaderEpoch, leo)
	switch {
	case e == checkpoint.UndefinedEpoch:
		return min(leaderEnd, leo), true
	case e != leaderEpoch:
		return min(end, leo), false
	default:
		return min(end, leaderEnd, leo), true
	}
}

// oorPlan is what to do about OFFSET_OUT_OF_RANGE: truncate to truncateTo
// (>= 0), or start over empty at startAt (>= 0), or neither (fetch again
// from the LEO).
type oorPlan struct{ truncateTo, startAt int64 }

// outOfRangePlan is Kafka's fetchOffsetAndTruncate: the leader's log ends
// below ours (the unclean case: truncate to its end, below our HW if need
// be); or it starts above our end (truncate fully, start at its start);
// else our LEO is fine and the leader's log moved meanwhile (fetch again).
// leaderStart matters only when leaderEnd >= leo.
func outOfRangePlan(leo, leaderEnd, leaderStart int64) oorPlan {
	switch {
	case leaderEnd < leo:
		return oorPlan{truncateTo: max(leaderEnd, 0), startAt: -1}
	case leaderStart > leo:
		return oorPlan{truncateTo: -1, startAt: leaderStart}
	default:
		return oorPlan{truncateTo: -1, startAt: -1}
	}
}

// errStraddle: a batch holds the fetch offset in its middle, so its tail
// cannot be appended after our log end.
var errStraddle = errors.New("broker: a fetched batch starts below the fetch offset and ends above it")

// followerBatches is the part of a fetched partition's record set a
// follower appends at fetchOffset: whole batches only (a trailing partial
// batch, which the leader's byte limits may cut, KIP-74, is left for the
// next fetch) and none wholly below fetchOffset (the leader sends the
// batch holding the offset, which after compaction may start below it).
// A batch that does not even frame is an error (CORRUPT_MESSAGE: fetch
// again after the backoff); CRCs are checked by the append.
func followerBatches(records []byte, fetchOffset int64) ([]byte, error) {
	start, end := 0, 0
	for end < len(records) {
		b, _, err := batch.Split(records[end:])
		if errors.Is(err, batch.ErrTruncated) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("broker: fetched batch at byte %d: %w", end, err)
		}
		if len(b) < batch.HeaderSize {
			break
		}
		h, err := batch.ParseHeader(b)
		if err != nil {
			return nil, fmt.Errorf("broker: fetched batch at byte %d: %w", end, err)
		}
		switch {
		case h.LastOffset() < fetchOffset:
			if start != end {
				return nil, fmt.Errorf("broker: fetched batch at %d after batches above it", h.BaseOffset)
			}
			start = end + len(b)
		case h.BaseOffset < fetchOffset && start == end:
			return nil, errStraddle
		}
		end += len(b)
	}
	return records[start:end], nil
}
