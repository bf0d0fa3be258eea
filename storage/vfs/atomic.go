package vfs

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
)

// AtomicTmpSuffix is appended to a path for the temporary file
// [WriteFileAtomic] writes before renaming it into place (storage's
// recovery removes such leftovers of a crash).
const AtomicTmpSuffix = ".tmp"

// WriteFileAtomic replaces path with data so that a crash at any point
// leaves either the old file or the new one, never a mix: write
// path.tmp, fsync it, close it, rename it over path, fsync the directory.
// Every small file of a data directory is written this way
// (meta.properties, partition.metadata, the producer-id block, the
// checkpoints, the clean-shutdown marker, producer snapshots).
//
// A failure before the rename leaves the old file untouched and removes
// the temporary file (best effort: a failing Remove leaves it for
// recovery). A failure of the directory fsync comes after the rename: the
// new file is in place, but its durability is unknown, and the error says
// so. Errors name the step ("create", "write", "sync", "close", "rename",
// "sync dir of") and wrap the file system's error.
func WriteFileAtomic(fs FS, path string, data []byte) error {
	return writeFileAtomic(fs, path, data, true)
}

// WriteFileAtomicDeferDirSync is [WriteFileAtomic] without the final
// directory fsync: the caller must SyncDir(filepath.Dir(path)) before it
// relies on the new file, typically once for several entries of the same
// directory (a segment roll syncs its new segment's files and the
// producer snapshot with one directory fsync).
func WriteFileAtomicDeferDirSync(fs FS, path string, data []byte) error {
	return writeFileAtomic(fs, path, data, false)
}

func writeFileAtomic(fs FS, path string, data []byte, syncDir bool) (err error) {
	tmp := path + AtomicTmpSuffix
	f, err := fs.Create(tmp)
	if err != nil {
		// A failed create may still have made the file (a fault after
		// the open): remove it as for any later failure.
		_ = fs.Remove(tmp)
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			_ = fs.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	renamed = true
	if !syncDir {
		return nil
	}
	if err := fs.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("sync dir of %s: %w", path, err)
	}
	return nil
}

// ErrTooLarge is wrapped by [ReadFile]'s error for a file over its limit.
var ErrTooLarge = errors.New("vfs: file larger than the limit")

// ReadFile returns the whole contents of the named file, refusing (with
// an error wrapping [ErrTooLarge]) one of more than limit bytes, so a
// garbage file in place of a small one cannot make a read allocate
// without bound. Its error for a missing file matches fs.ErrNotExist.
func ReadFile(fs FS, name string, limit int64) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s: over %d bytes", ErrTooLarge, name, limit)
	}
	return b, nil
}
