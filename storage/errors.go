package storage

import (
	"errors"
	"fmt"
	iofs "io/fs"

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
)

var errNotExist = iofs.ErrNotExist

// errFsync marks an fsync failure: whatever it says (even ENOSPC, from
// delayed allocation), written data may be lost, so the log latches.
var errFsync = errors.New("fsync failed")
