package storage

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

var (
	// ErrOffsetOutOfRange is returned by [Log.Read] and [Log.Truncate] for
	// an offset below the local log start offset or above the log end
	// offset. It satisfies errors.Is(err, kerr.OffsetOutOfRange).
	ErrOffsetOutOfRange = fmt.Errorf("storage: offset out of range: %w", kerr.OffsetOutOfRange)

	// ErrLogFailed is returned by every mutating method of a [Log] after a
	// write, sync or rename failed: the log latches and its directory is
	// reported offline. It satisfies errors.Is(err, kerr.KafkaStorageError).
	ErrLogFailed = fmt.Errorf("storage: log failed: %w", kerr.KafkaStorageError)

	// ErrLogDirFull is returned by [Log.Append] (and a roll) while the
	// log's data directory is full: free space below MinFreeBytes, or a
	// write failed with ENOSPC (cut back: nothing of it is visible). The
	// log does not latch: appends resume by themselves once space is back.
	// It satisfies errors.Is(err, kerr.KafkaStorageError).
	ErrLogDirFull = fmt.Errorf("storage: log dir full: %w", kerr.KafkaStorageError)

	// ErrClosed is returned by methods of a closed [Log] or [Manager].
	ErrClosed = errors.New("storage: closed")

	// ErrCorruption marks damage that recovery cannot repair by truncating
	// a torn tail: an invalid batch in data that was known flushed (below
	// the recovery point), or a batch header that does not parse while
	// reading. It satisfies errors.Is(err, kerr.CorruptMessage).
	ErrCorruption = fmt.Errorf("storage: corruption: %w", kerr.CorruptMessage)

	// ErrInvalidOffset is returned by [Log.Append] for follower batches
	// whose offsets are below the log end offset or not increasing, and by
	// [Log.SetLogStartOffset] for an offset past the log end.
	ErrInvalidOffset = fmt.Errorf("storage: invalid offset: %w", kerr.InvalidRecord)

	// ErrNoSuchSegment is returned by [Log.OpenSealedSegment] for a base
	// offset no sealed segment of the log has (deleted by retention, cut
	// by truncation, still the active segment, or never there).
	ErrNoSuchSegment = errors.New("storage: no such sealed segment")
)

var errNotExist = iofs.ErrNotExist

// errFsync marks an fsync failure: whatever it says (even ENOSPC, from
// delayed allocation), written data may be lost, so the log latches.
var errFsync = errors.New("fsync failed")

// RecordError is one record a batch was refused for (KIP-467): its index
// in the batch and why, as Kafka's ProduceResponse v8+ reports it
// (RecordErrors: BatchIndex, BatchIndexErrorMessage).
type RecordError struct {
	Index   int32
	Message string
}

// InvalidRecordsError is returned by [Log.Append] when records of a batch
// fail a per-record check (a record without a key bound for a compacted
// log). As in Kafka, the whole record set is refused, valid records
// included, and Records lists every invalid one. It satisfies
// errors.Is(err, kerr.InvalidRecord).
type InvalidRecordsError struct {
	Records []RecordError
}

// Error is Kafka's message for the same refusal (LogValidator's
// processRecordErrors), which its ProduceResponse carries as ErrorMessage.
func (e *InvalidRecordsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [", len(e.Records))
	for i, r := range e.Records[:min(len(e.Records), 3)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "RecordError(batchIndex=%d, message='%s')", r.Index, r.Message)
	}
	b.WriteString("]")
	return b.String()
}

// Unwrap makes the error match kerr.InvalidRecord.
func (e *InvalidRecordsError) Unwrap() error { return kerr.InvalidRecord }
