package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) OSFile() *os.File { return f.File }

// Mmap maps the first length bytes. The kernel would map past the end of
// the file and deliver SIGBUS on the first touch of a page beyond it; the
// check turns that crash into an error (MemFS refuses the same way).
func (f osFile) Mmap(length int) ([]byte, error) {
	if length == 0 {
		return nil, nil
	}
	st, err := f.File.Stat()
	if err != nil {
		return nil, fmt.Errorf("vfs: mmap %s: %w", f.Name(), err)
	}
	if length < 0 || int64(length) > st.Size() {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: syscall.EINVAL}
	}
	b, err := unix.Mmap(int(f.Fd()), 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("vfs: mmap %s: %w", f.Name(), err)
	}
	return b, nil
}

func (f osFile) Munmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return unix.Munmap(b)
}

func wrap(f *os.File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Create(name string) (File, error) {
	return wrap(os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644))
}

func (osFS) CreateExclusive(name string, perm os.FileMode) (File, error) {
	return wrap(os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm))
}

func (osFS) Open(name string) (File, error) { return wrap(os.Open(name)) }

func (osFS) OpenReadWrite(name string) (File, error) {
	return wrap(os.OpenFile(name, os.O_RDWR, 0))
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(o, n string) error                    { return os.Rename(o, n) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Lock takes flock(LOCK_EX|LOCK_NB) on name, as Kafka locks a log dir's
// .lock file, and writes "pid=<pid>" into it so the next process to try
// can say who holds it. The kernel drops the lock when the process dies,
// so a stale file from a crash never blocks a start.
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			b := make([]byte, 64)
			n, _ := f.ReadAt(b, 0)
			return nil, &LockedError{Path: name, Holder: strings.TrimSpace(string(b[:n]))}
		}
		return nil, &os.PathError{Op: "flock", Path: name, Err: err}
	}
	pid := "pid=" + strconv.Itoa(os.Getpid()) + "\n"
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(pid), 0) // best effort: only a hint for the next process
	}
	return f, nil
}

// FreeSpace returns statfs's f_bavail * f_bsize for path.
func (osFS) FreeSpace(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
