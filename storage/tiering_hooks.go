package storage

import (
	"errors"
	"fmt"
	"io"
	"os"

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

// BytesView returns a ReadView over records held in memory (batches read
// from the remote tier): the fetch path sends it like a file region, by
// copying instead of sendfile. first and next are the view's FirstOffset
// and NextOffset. Release is a no-op.
func BytesView(records []byte, first, next int64) ReadView {
	return ReadView{File: &bytesFile{b: records}, Size: int64(len(records)), FirstOffset: first, NextOffset: next}
}

// bytesFile is a read-only vfs.File over a byte slice.
type bytesFile struct{ b []byte }

var errReadOnly = errors.New("storage: read-only in-memory view")

func (f *bytesFile) Read(p []byte) (int, error) { return 0, errReadOnly }
func (f *bytesFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(f.b)) {
		return 0, io.EOF
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (f *bytesFile) Write([]byte) (int, error)          { return 0, errReadOnly }
func (f *bytesFile) WriteAt([]byte, int64) (int, error) { return 0, errReadOnly }
func (f *bytesFile) Close() error                       { return nil }
func (f *bytesFile) Sync() error                        { return nil }
func (f *bytesFile) Truncate(int64) error               { return errReadOnly }
func (f *bytesFile) Stat() (os.FileInfo, error)         { return nil, errReadOnly }
func (f *bytesFile) Name() string                       { return "(remote records)" }
func (f *bytesFile) Mmap(int) ([]byte, error)           { return nil, errReadOnly }
func (f *bytesFile) Munmap([]byte) error                { return errReadOnly }
