package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// File is an open file. Implementations are safe for concurrent ReadAt
// calls; Write, WriteAt, Truncate and Sync must be serialized by the caller
// (storage holds a per-partition append lock).
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Sync makes everything written so far, including through a mapping
	// returned by Mmap, durable.
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Stat returns the file's info; Size is what has been written.
	Stat() (os.FileInfo, error)
	// Name is the path the file was opened with.
	Name() string
	// Mmap maps the first length bytes of the file shared and read-write
	// (the file must already be at least that long). Bytes written through
	// the mapping become durable on Sync. The caller owns the mapping and
	// must Munmap it before Close.
	Mmap(length int) ([]byte, error)
	// Munmap releases a mapping returned by Mmap.
	Munmap(b []byte) error
}

// OSFile is implemented by files backed by an operating-system file
// descriptor, so the broker can hand their regions to sendfile(2).
type OSFile interface {
	OSFile() *os.File
}

// FS is a file system. All methods are safe for concurrent use.
type FS interface {
	// Create creates or truncates the named file, opened read-write.
	Create(name string) (File, error)
	// CreateExclusive creates the named file, which must not exist,
	// opened read-write with permissions perm (O_CREATE|O_EXCL): if
	// anything exists at name, a file or a directory, it fails with an
	// error matching fs.ErrExist and leaves it as it is.
	CreateExclusive(name string, perm os.FileMode) (File, error)
	// Open opens the named file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file read-write, without truncating.
	OpenReadWrite(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a path and everything below it.
	RemoveAll(name string) error
	// Rename atomically renames oldname to newname, replacing newname.
	// The rename is durable only after SyncDir of the parent directory.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names (not paths) of a directory's entries, sorted.
	List(dir string) ([]string, error)
	// Stat returns a path's info.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory's entries (creates, renames, removes)
	// durable.
	SyncDir(dir string) error
	// Lock takes an exclusive, advisory lock on the named file (created if
	// missing), held until the returned Closer is closed or the process
	// exits. It does not wait: a lock held elsewhere fails with an error
	// matching [ErrLocked] (a [*LockedError] naming the holder if known).
	// Not reentrant: locking a file this FS already holds fails too.
	Lock(name string) (io.Closer, error)
	// FreeSpace returns the bytes available to this process on the file
	// system holding path (statfs: blocks available to unprivileged users).
	FreeSpace(path string) (int64, error)
}

// ErrLocked is matched (errors.Is) by the error of [FS.Lock] when another
// holder has the lock.
var ErrLocked = errors.New("vfs: locked by another holder")

// LockedError is [FS.Lock]'s error for a lock someone else holds.
type LockedError struct {
	Path   string
	Holder string // what the lock file says about its holder (a pid), or ""
}

func (e *LockedError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("%s is locked by another process", e.Path)
	}
	return fmt.Sprintf("%s is locked by another process (%s)", e.Path, e.Holder)
}

// Is makes a *LockedError match [ErrLocked].
func (e *LockedError) Is(target error) bool { return target == ErrLocked }
