package storage

import (
	"fmt"

	"github.com/strata-io/strata/storage/vfs"
)

// FS returns the file system the log's files live on: tiering opens the
// paths of [Log.Segments] through it, never through package os.
func (l *Log) FS() vfs.FS { return l.fs }

// SetRemoteLogStart sets the log start offset of a remote-storage log to
// off, the remote tier's start: unlike [Log.SetLogStartOffset] it may move
// the log start back below the local log start (after a restart or a
// restore, tiering knows the remote start better than the checkpoint), but
// never above it, and never below 0. Ignored unless remote.storage.enable.
func (l *Log) SetRemoteLogStart(off int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if !l.cfg.Load().RemoteStorageEnable || off < 0 {
		return nil
	}
	local := l.localStart.Load()
	if off > local {
		return fmt.Errorf("%w: remote log start %d above the local log start %d", ErrOffsetOutOfRange, off, local)
	}
	l.logStart.Store(off)
	return nil
}

// RestartAt empties the log and restarts it at next, with log start offset
// logStart (<= next): a partition whose local copy is gone and whose older
// data is in the remote tier (a restore, or a replica on a new disk) serves
// [logStart, next) from the remote tier and appends from next.
func (l *Log) RestartAt(logStart, next int64) error {
	if logStart > next || logStart < 0 {
		return fmt.Errorf("%w: restart at %d with log start %d", ErrOffsetOutOfRange, next, logStart)
	}
	if err := l.TruncateFullyAndStartAt(next); err != nil {
		return err
	}
	return l.SetRemoteLogStart(logStart)
}
