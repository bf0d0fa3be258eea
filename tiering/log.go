package tiering

import (
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/checkpoint"
)

// Log is what tiering uses of a led partition's local log; *storage.Log
// implements it (the broker passes one per partition). Nothing else of
// storage is called.
//
// Thread-safety: every method is safe for concurrent use with the log's
// appends, rolls, retention and reads (the uploader calls them from its
// partition goroutine, the broker's request paths call the log meanwhile).
//
// Errors: offsets a method refuses are [storage.ErrOffsetOutOfRange]
// (wrapped); a closed or failed log answers [storage.ErrClosed] or
// [storage.ErrLogFailed]; [Log.OpenSealedSegment] answers
// [storage.ErrNoSuchSegment] for a segment the log no longer holds (or
// never sealed).
//
// Idempotence: SetRemoteUploadedOffset, SetLogStartOffset and
// SetRemoteLogStart only ever move forward (or refuse) and may be called
// again with the same value; RestartAt is called once per Lead.
type Log interface {
	// Segments lists the local segments, oldest first (a fresh slice the
	// caller owns).
	Segments() []storage.SegmentInfo
	LogStartOffset() int64      // the whole log's start
	LocalLogStartOffset() int64 // the first offset on local disk
	LogEndOffset() int64        // the next offset to be written
	Config() storage.Config     // the topic config in force (a copy)
	// LeaderEpochs is the log's leader-epoch cache (its Entries are a
	// copy).
	LeaderEpochs() *checkpoint.LeaderEpochCache

	// SetRemoteUploadedOffset lets local retention delete below next (all
	// of it is remote); lower values are ignored.
	SetRemoteUploadedOffset(next int64)
	// SetLogStartOffset raises the log start (remote retention), dropping
	// local segments below it.
	SetLogStartOffset(off int64) error
	// SetRemoteLogStart lowers the log start to the remote tier's start
	// (refused above the local start).
	SetRemoteLogStart(off int64) error
	// RestartAt empties the log and restarts it at next with log start
	// logStart (a lost disk, a restore).
	RestartAt(logStart, next int64) error

	// OpenSealedSegment opens the files of the sealed segment with base
	// offset base, and the producer snapshot at its end, for copying: they
	// stay readable until Release, even if retention deletes the segment
	// meanwhile (a reference, as a ReadView holds).
	OpenSealedSegment(base int64) (*storage.SealedSegment, error)
}

var _ Log = (*storage.Log)(nil)
