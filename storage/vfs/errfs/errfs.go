package errfs

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/strata-io/strata/storage/vfs"
)

// Op is the kind of a file-system operation.
type Op int

// The operations an [Injector] can see. File-level operations name the
// file by the path it was opened with.
const (
	OpCreate Op = iota
	OpOpen
	OpOpenReadWrite
	OpRemove
	OpRemoveAll
	OpRename
	OpMkdirAll
	OpList
	OpStat
	OpSyncDir
	OpRead
	OpReadAt
	OpWrite
	OpWriteAt
	OpSync
	OpTruncate
	OpFileStat
	OpClose
	OpMmap
	OpMunmap
	OpLock
	OpFreeSpace
	OpCreateExclusive
	numOps
)

var opNames = [numOps]string{
	"create", "open", "openrw", "remove", "removeall", "rename", "mkdirall", "list", "stat", "syncdir",
	"read", "readat", "write", "writeat", "sync", "truncate", "fstat", "close", "mmap", "munmap",
	"lock", "freespace", "createexcl",
}

func (o Op) String() string {
	if o >= 0 && o < numOps {
		return opNames[o]
	}
	return "op?"
}

// Groups of operations for [On].
var (
	// Writes are the operations that change a file's bytes.
	Writes = []Op{OpWrite, OpWriteAt, OpTruncate}
	// Syncs are the operations that make things durable.
	Syncs = []Op{OpSync, OpSyncDir}
	// Reads are the operations that read a file's bytes.
	Reads = []Op{OpRead, OpReadAt}
	// Namespace are the operations that change directory entries.
	Namespace = []Op{OpCreate, OpCreateExclusive, OpRemove, OpRemoveAll, OpRename, OpMkdirAll}
)

// Call describes one operation about to happen.
type Call struct {
	Op      Op
	Path    string // the file or directory; for Rename the old name
	NewPath string // Rename's new name
	Off     int64  // WriteAt/ReadAt offset, Truncate size
	Len     int    // bytes to read or write, Mmap length
}

// Fault is what an [Injector] does to a call.
type Fault struct {
	// Delay is slept before anything else.
	Delay time.Duration
	// Err, if set, fails the call: it is returned wrapped as the os package
	// would (*os.PathError or *os.LinkError) and marked [ErrInjected].
	// The operation itself does not happen, except for a short transfer.
	Err error
	// Short applies to Read, ReadAt, Write and WriteAt failing with Err (or
	// EIO if Err is nil): that many bytes are transferred first. A negative
	// value means half the buffer. Short is capped below the buffer's size.
	Short int
	// ShortSet says Short is meant (so Short(0) is a write of nothing).
	ShortSet bool
}

// Injector decides, for every call, whether to inject a fault (nil means
// none). Implementations must be safe for concurrent use.
type Injector interface {
	Inject(c Call) *Fault
}

// InjectorFunc adapts a function to [Injector].
type InjectorFunc func(Call) *Fault

// Inject implements [Injector].
func (f InjectorFunc) Inject(c Call) *Fault { return f(c) }

// ErrInjected is matched (errors.Is) by every error errfs injects.
var ErrInjected = errors.New("errfs: injected fault")

type injected struct{ err error }

func (e *injected) Error() string        { return "errfs: injected " + e.err.Error() }
func (e *injected) Unwrap() error        { return e.err }
func (e *injected) Is(target error) bool { return target == ErrInjected }

// Any combines injectors: every one sees every call (so counting rules keep
// counting), and the first non-nil fault, in argument order, wins.
func Any(injs ...Injector) Injector {
	return InjectorFunc(func(c Call) *Fault {
		var out *Fault
		for _, inj := range injs {
			if f := inj.Inject(c); f != nil && out == nil {
				out = f
			}
		}
		return out
	})
}

// Rule is an [Injector] matching calls by operation, path glob and
// position among matching calls, and acting on the matches it selects.
// Configure it with the chaining methods before use; afterwards it is safe
// for concurrent use.
type Rule struct {
	ops   [numOps]bool
	any   bool
	glob  string
	nth   int // 0 = every match
	from  int // 0 = off
	prob  float64
	rng   *rand.Rand
	fault Fault
	act   bool

	// mu guards matched, fired and rng.
	mu      sync.Mutex
	matched int
	fired   int
	off     bool
}

// On starts a rule matching the given operations (none: every operation).
func On(ops ...Op) *Rule {
	r := &Rule{any: len(ops) == 0}
	for _, o := range ops {
		r.ops[o] = true
	}
	return r
}

// Glob restricts the rule to paths matching pattern (path.Match syntax):
// against the base name if pattern has no '/', else against the whole
// cleaned path. Rename matches if either name does.
func (r *Rule) Glob(pattern string) *Rule { r.glob = pattern; return r }

// Nth selects only the nth matching call (1-based).
func (r *Rule) Nth(n int) *Rule { r.nth = n; return r }

// From selects every matching call from the nth on: a disk that stays
// broken.
func (r *Rule) From(n int) *Rule { r.from = n; return r }

// Prob selects each matching call (among those Nth/From select) with
// probability p, drawing from rng.
func (r *Rule) Prob(p float64, rng *rand.Rand) *Rule { r.prob, r.rng = p, rng; return r }

// Err makes selected calls fail with err (typically a syscall.Errno).
func (r *Rule) Err(err error) *Rule { r.fault.Err, r.act = err, true; return r }

// Short makes selected reads and writes transfer n bytes (negative: half
// the buffer) and then fail with err (EIO if nil). Other selected calls
// fail with err.
func (r *Rule) Short(n int, err error) *Rule {
	if err == nil {
		err = syscall.EIO
	}
	r.fault.Short, r.fault.ShortSet, r.fault.Err, r.act = n, true, err, true
	return r
}

// Delay makes selected calls sleep d first (and then fail too if Err or
// Short is also set).
func (r *Rule) Delay(d time.Duration) *Rule { r.fault.Delay, r.act = d, true; return r }

// Disable stops the rule from selecting anything (it keeps counting
// matches); Enable undoes it.
func (r *Rule) Disable() { r.mu.Lock(); r.off = true; r.mu.Unlock() }

// Enable undoes [Rule.Disable].
func (r *Rule) Enable() { r.mu.Lock(); r.off = false; r.mu.Unlock() }

// Matched returns how many calls matched the rule's operations and glob.
func (r *Rule) Matched() int { r.mu.Lock(); defer r.mu.Unlock(); return r.matched }

// Fired returns how many calls the rule acted on.
func (r *Rule) Fired() int { r.mu.Lock(); defer r.mu.Unlock(); return r.fired }

// Inject implements [Injector].
func (r *Rule) Inject(c Call) *Fault {
	if !r.any && (c.Op < 0 || c.Op >= numOps || !r.ops[c.Op]) {
		return nil
	}
	if r.glob != "" && !globMatch(r.glob, c.Path) && (c.NewPath == "" || !globMatch(r.glob, c.NewPath)) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.matched++
	n := r.matched
	switch {
	case !r.act || r.off:
		return nil
	case r.nth > 0 && n != r.nth:
		return nil
	case r.from > 0 && n < r.from:
		return nil
	case r.rng != nil && r.rng.Float64() >= r.prob:
		return nil
	}
	r.fired++
	f := r.fault
	return &f
}

func globMatch(pattern, name string) bool {
	name = path.Clean(name)
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == '/' {
			ok, _ := path.Match(pattern, name)
			return ok
		}
	}
	ok, _ := path.Match(pattern, path.Base(name))
	return ok
}

var _ vfs.FS = (*FS)(nil)

// FS is a [vfs.FS] whose calls pass through an [Injector].
type FS struct {
	fs   vfs.FS
	inj  Injector
	free atomic.Int64 // SetFreeSpace; < 0: pass through
}

// Wrap returns fs with inj consulted before every operation.
func Wrap(fs vfs.FS, inj Injector) *FS {
	e := &FS{fs: fs, inj: inj}
	e.free.Store(-1)
	return e
}

// Unwrap returns the wrapped file system.
func (e *FS) Unwrap() vfs.FS { return e.fs }

// check consults the injector; it sleeps any delay and returns the fault
// whose error (if any) the caller must return.
func (e *FS) check(c Call) *Fault {
	f := e.inj.Inject(c)
	if f == nil {
		return nil
	}
	if f.Delay > 0 {
		time.Sleep(f.Delay)
	}
	if f.Err == nil && !f.ShortSet {
		return nil
	}
	if f.Err == nil {
		f.Err = syscall.EIO
	}
	return f
}

func pathErr(c Call, err error) error {
	return &os.PathError{Op: c.Op.String(), Path: c.Path, Err: &injected{err}}
}

// Create implements [vfs.FS].
func (e *FS) Create(name string) (vfs.File, error) {
	c := Call{Op: OpCreate, Path: name}
	if f := e.check(c); f != nil {
		return nil, pathErr(c, f.Err)
	}
	return e.file(e.fs.Create(name))
}

// CreateExclusive implements [vfs.FS].
func (e *FS) CreateExclusive(name string, perm os.FileMode) (vfs.File, error) {
	c := Call{Op: OpCreateExclusive, Path: name}
	if f := e.check(c); f != nil {
		return nil, pathErr(c, f.Err)
	}
	return e.file(e.fs.CreateExclusive(name, perm))
}

// Open implements [vfs.FS].
func (e *FS) Open(name string) (vfs.File, error) {
	c := Call{Op: OpOpen, Path: name}
	if f := e.check(c); f != nil {
		return nil, pathErr(c, f.Err)
	}
	return e.file(e.fs.Open(name))
}

// OpenReadWrite implements [vfs.FS].
func (e *FS) OpenReadWrite(name string) (vfs.File, error) {
	c := Call{Op: OpOpenReadWrite, Path: name}
	if f := e.check(c); f != nil {
		return nil, pathErr(c, f.Err)
	}
	return e.file(e.fs.OpenReadWrite(name))
}

func (e *FS) file(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &file{f: f, fs: e}, nil
}

// Remove implements [vfs.FS].
func (e *FS) Remove(name string) error {
	c := Call{Op: OpRemove, Path: name}
	if f := e.check(c); f != nil {
		return pathErr(c, f.Err)
	}
	return e.fs.Remove(name)
}

// RemoveAll implements [vfs.FS].
func (e *FS) RemoveAll(name string) error {
	c := Call{Op: OpRemoveAll, Path: name}
	if f := e.check(c); f != nil {
		return pathErr(c, f.Err)
	}
	return e.fs.RemoveAll(name)
}

// Rename implements [vfs.FS]; a failed rename leaves both names as they
// were.
func (e *FS) Rename(oldname, newname string) error {
	c := Call{Op: OpRename, Path: oldname, NewPath: newname}
	if f := e.check(c); f != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: &injected{f.Err}}
	}
	return e.fs.Rename(oldname, newname)
}

// MkdirAll implements [vfs.FS].
func (e *FS) MkdirAll(dir string, perm os.FileMode) error {
	c := Call{Op: OpMkdirAll, Path: dir}
	if f := e.check(c); f != nil {
		return pathErr(c, f.Err)
	}
	return e.fs.MkdirAll(dir, perm)
}

// List implements [vfs.FS].
func (e *FS) List(dir string) ([]string, error) {
	c := Call{Op: OpList, Path: dir}
	if f := e.check(c); f != nil {
		return nil, pathErr(c, f.Err)
	}
	return e.fs.List(dir)
}

// Stat implements [vfs.FS].
func (e *FS) Stat(name string) (os.FileInfo, error) {
	c := Call{Op: OpStat, Path: name}
	if f := e.check(c); f != nil {
		return nil, pathErr(c, f.Err)
	}
	return e.fs.Stat(name)
}

// SyncDir implements [vfs.FS]; a failed SyncDir makes nothing durable.
func (e *FS) SyncDir(dir string) error {
	c := Call{Op: OpSyncDir, Path: dir}
	if f := e.check(c); f != nil {
		return pathErr(c, f.Err)
	}
	return e.fs.SyncDir(dir)
}

// Lock implements [vfs.FS].
func (e *FS) Lock(name string) (io.Closer, error) {
	c := Call{Op: OpLock, Path: name}
	if f := e.check(c); f != nil {
		return nil, pathErr(c, f.Err)
	}
	return e.fs.Lock(name)
}

// FreeSpace implements [vfs.FS]. A fault's error fails it; [FS.SetFreeSpace]
// overrides what it answers.
func (e *FS) FreeSpace(name string) (int64, error) {
	c := Call{Op: OpFreeSpace, Path: name}
	if f := e.check(c); f != nil {
		return 0, pathErr(c, f.Err)
	}
	if n := e.free.Load(); n >= 0 {
		return n, nil
	}
	return e.fs.FreeSpace(name)
}

// SetFreeSpace makes FreeSpace answer n for every path (a disk that filled
// up, with ENOSPC injected on writes); a negative n restores the wrapped
// file system's answer.
func (e *FS) SetFreeSpace(n int64) { e.free.Store(n) }

// file wraps an open file. It deliberately does not implement
// vfs.OSFile: a sendfile path would bypass the injector.
type file struct {
	f  vfs.File
	fs *FS
}

func (f *file) call(op Op, off int64, n int) Call {
	return Call{Op: op, Path: f.f.Name(), Off: off, Len: n}
}

// shortLen is how many bytes of an n-byte transfer a short fault moves.
func shortLen(fl *Fault, n int) int {
	if !fl.ShortSet {
		return 0
	}
	s := fl.Short
	if s < 0 {
		s = n / 2
	}
	if s >= n {
		s = max(n-1, 0)
	}
	return s
}

func (f *file) Read(p []byte) (int, error) {
	c := f.call(OpRead, -1, len(p))
	if fl := f.fs.check(c); fl != nil {
		k := shortLen(fl, len(p))
		if k > 0 {
			if n, err := f.f.Read(p[:k]); err != nil {
				return n, err
			}
		}
		return k, pathErr(c, fl.Err)
	}
	return f.f.Read(p)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	c := f.call(OpReadAt, off, len(p))
	if fl := f.fs.check(c); fl != nil {
		k := shortLen(fl, len(p))
		if k > 0 {
			if n, err := f.f.ReadAt(p[:k], off); err != nil {
				return n, err
			}
		}
		return k, pathErr(c, fl.Err)
	}
	return f.f.ReadAt(p, off)
}

func (f *file) Write(p []byte) (int, error) {
	c := f.call(OpWrite, -1, len(p))
	if fl := f.fs.check(c); fl != nil {
		k := shortLen(fl, len(p))
		if k > 0 {
			if n, err := f.f.Write(p[:k]); err != nil {
				return n, err
			}
		}
		return k, pathErr(c, fl.Err)
	}
	return f.f.Write(p)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	c := f.call(OpWriteAt, off, len(p))
	if fl := f.fs.check(c); fl != nil {
		k := shortLen(fl, len(p))
		if k > 0 {
			if n, err := f.f.WriteAt(p[:k], off); err != nil {
				return n, err
			}
		}
		return k, pathErr(c, fl.Err)
	}
	return f.f.WriteAt(p, off)
}

func (f *file) Close() error {
	c := f.call(OpClose, 0, 0)
	if fl := f.fs.check(c); fl != nil {
		// close(2) releases the descriptor even when it reports an
		// error; so does errfs, so the failure leaks nothing.
		f.f.Close()
		return pathErr(c, fl.Err)
	}
	return f.f.Close()
}

func (f *file) Sync() error {
	c := f.call(OpSync, 0, 0)
	if fl := f.fs.check(c); fl != nil {
		return pathErr(c, fl.Err)
	}
	return f.f.Sync()
}

func (f *file) Truncate(size int64) error {
	c := f.call(OpTruncate, size, 0)
	if fl := f.fs.check(c); fl != nil {
		return pathErr(c, fl.Err)
	}
	return f.f.Truncate(size)
}

func (f *file) Stat() (os.FileInfo, error) {
	c := f.call(OpFileStat, 0, 0)
	if fl := f.fs.check(c); fl != nil {
		return nil, pathErr(c, fl.Err)
	}
	return f.f.Stat()
}

func (f *file) Name() string { return f.f.Name() }

func (f *file) Mmap(length int) ([]byte, error) {
	c := f.call(OpMmap, 0, length)
	if fl := f.fs.check(c); fl != nil {
		return nil, pathErr(c, fl.Err)
	}
	return f.f.Mmap(length)
}

func (f *file) Munmap(b []byte) error {
	c := f.call(OpMunmap, 0, len(b))
	if fl := f.fs.check(c); fl != nil {
		return pathErr(c, fl.Err)
	}
	return f.f.Munmap(b)
}
