package vfs

import (
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MemFS is an in-memory [FS] that remembers, for every file and directory,
// what is durable and what is not, so that [MemFS.CrashClone] can produce
// the file system a process would find after a power loss.
//
// The durability model (what CrashClone keeps):
//
//   - File contents: everything up to the file's last [File.Sync] is kept.
//     The writes and truncations issued since then are replayed in order on
//     top of the synced contents until a random byte budget runs out; the
//     write that exhausts the budget is torn (only its first bytes land).
//     Bytes written through an Mmap mapping since the last Sync are kept
//     page by page (4 KiB), each page independently.
//   - Directory entries: a create, remove, rename or mkdir is durable once
//     [MemFS.SyncDir] has been called on a directory it touched (the parent;
//     for a rename, either parent). A rename is one operation, kept or lost
//     as a whole. So that no impossible state arises, SyncDir also commits
//     every earlier operation on the same names (a rename of x.tmp makes
//     the create of x.tmp durable). Nothing else is implied: syncing a
//     directory never makes its own entry in its parent durable, so a new
//     directory needs SyncDir of its parent too. Operations still pending
//     at the crash are kept or lost independently of each other, and
//     replayed in issue order.
//
// Paths are cleaned with path.Clean; "/a/b" and "a/b" name the same file.
//
// All methods are safe for concurrent use. Bytes written through a mapping
// returned by [File.Mmap] bypass MemFS's lock, exactly as they bypass the
// kernel: the caller must not write a mapping while another goroutine
// calls Sync, CrashClone or Clone on the same file system.
type MemFS struct {
	// mu guards the whole tree: every node's entries, durable entries,
	// contents, synced contents and op logs, and pending.
	mu   sync.RWMutex
	root *memNode
	// pending holds the directory operations not yet durable, oldest first.
	pending []*dirOp

	syncs atomic.Int64
	hook  atomic.Pointer[func(SyncEvent)]

	locksMu sync.Mutex
	locks   map[string]bool // paths held by Lock
	free    atomic.Int64    // what FreeSpace answers (SetFreeSpace)
}

// SyncEvent describes one File.Sync or SyncDir call on a [MemFS], passed to
// the hook set with [MemFS.SetSyncHook].
type SyncEvent struct {
	// N counts syncs on this file system, starting at 1.
	N int64
	// Path is the file's name as opened, or the directory synced.
	Path string
	// Dir is true for SyncDir.
	Dir bool
}

// memPageSize is the granularity at which unsynced bytes written through a
// mapping survive a crash.
const memPageSize = 4096

// memNode is a file or a directory. A node is shared by every name that
// points at it and every open handle, so a removed file stays readable
// through handles opened before the removal, as on POSIX.
type memNode struct {
	dir     bool
	modTime time.Time

	// Directories.
	entries map[string]*memNode // the current entries
	durable map[string]*memNode // the entries as of the last committing SyncDir

	// Files.
	data   []byte  // current contents
	synced []byte  // contents as of the last Sync
	ops    []memOp // writes and truncations since the last Sync, oldest first
	// mappings are the live mappings handed out by Mmap; mapDirty is set
	// while writes through a mapping may exist that no op records.
	mappings []*memMap
	mapDirty bool
}

// memMap is one live mapping. It aliases data's backing array until data
// has to grow past its capacity; from then on it is detached and kept
// coherent by copying: pullLocked before data is read, pushLocked after
// data is written.
type memMap struct {
	b        []byte
	detached bool
}

// memOp is one unsynced change to a file: a write of data at off, or, if
// trunc, a truncation to size.
type memOp struct {
	off   int64
	data  []byte
	trunc bool
	size  int64
}

// dirOp is one namespace operation: a list of (directory, name) slots and
// what each now points to (nil = removed). A rename has two effects.
type dirOp struct {
	effects []dirEffect
}

type dirEffect struct {
	dir  *memNode
	name string
	node *memNode
}

// NewMem returns an empty in-memory file system holding only its root
// directory.
func NewMem() *MemFS {
	m := &MemFS{root: newMemDir()}
	m.free.Store(memDefaultFree)
	return m
}

// memDefaultFree is what FreeSpace answers until SetFreeSpace: 1 PiB.
const memDefaultFree = 1 << 50

// SetFreeSpace sets what [MemFS.FreeSpace] answers for every path (MemFS
// itself never runs out of space: inject ENOSPC with errfs to model a full
// disk, and set this to what such a disk would report).
func (m *MemFS) SetFreeSpace(n int64) { m.free.Store(n) }

// FreeSpace implements [FS]: the value set by SetFreeSpace (1 PiB by
// default), if path exists.
func (m *MemFS) FreeSpace(name string) (int64, error) {
	if _, err := m.Stat(name); err != nil {
		return 0, err
	}
	return m.free.Load(), nil
}

// Lock implements [FS] within this MemFS: the file is created if missing,
// and a second Lock of the same path before Close fails with a
// [*LockedError]. Locks are not part of the file system's state: Clone and
// CrashClone start with none held (as a restarted process would).
func (m *MemFS) Lock(name string) (io.Closer, error) {
	name = path.Clean("/" + name)
	if _, err := m.Stat(name); err != nil {
		f, err := m.Create(name)
		if err != nil {
			return nil, err
		}
		f.Close()
	}
	m.locksMu.Lock()
	defer m.locksMu.Unlock()
	if m.locks[name] {
		return nil, &LockedError{Path: name, Holder: "this process"}
	}
	if m.locks == nil {
		m.locks = map[string]bool{}
	}
	m.locks[name] = true
	return &memLock{m: m, name: name}, nil
}

type memLock struct {
	m    *MemFS
	name string
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.m.locksMu.Lock()
		delete(l.m.locks, l.name)
		l.m.locksMu.Unlock()
	})
	return nil
}

func newMemDir() *memNode {
	return &memNode{
		dir:     true,
		modTime: time.Now(),
		entries: map[string]*memNode{},
		durable: map[string]*memNode{},
	}
}

// SetSyncHook installs fn to be called at every File.Sync and SyncDir,
// before the sync takes effect and with no lock held: fn may call
// [MemFS.CrashClone] or [MemFS.Clone] to capture the state "as the sync was
// being issued". nil removes the hook.
func (m *MemFS) SetSyncHook(fn func(SyncEvent)) {
	if fn == nil {
		m.hook.Store(nil)
		return
	}
	m.hook.Store(&fn)
}

// SyncCount returns how many File.Sync and SyncDir calls this file system
// has seen.
func (m *MemFS) SyncCount() int64 { return m.syncs.Load() }

func (m *MemFS) noteSync(name string, dir bool) {
	n := m.syncs.Add(1)
	if fn := m.hook.Load(); fn != nil {
		(*fn)(SyncEvent{N: n, Path: name, Dir: dir})
	}
}

// split turns a path into its cleaned components; the root is none.
func split(name string) []string {
	name = strings.Trim(path.Clean("/"+name), "/")
	if name == "" {
		return nil
	}
	return strings.Split(name, "/")
}

// lookupLocked walks to the directory holding the last component of name.
// It returns that directory and the last component ("" for the root).
func (m *MemFS) lookupLocked(op, name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", nil
	}
	d := m.root
	for _, p := range parts[:len(parts)-1] {
		n, ok := d.entries[p]
		if !ok {
			return nil, "", &os.PathError{Op: op, Path: name, Err: syscall.ENOENT}
		}
		if !n.dir {
			return nil, "", &os.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
		}
		d = n
	}
	return d, parts[len(parts)-1], nil
}

// nodeLocked returns the node name points at.
func (m *MemFS) nodeLocked(op, name string) (*memNode, error) {
	d, base, err := m.lookupLocked(op, name)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return m.root, nil
	}
	n, ok := d.entries[base]
	if !ok {
		return nil, &os.PathError{Op: op, Path: name, Err: syscall.ENOENT}
	}
	return n, nil
}

// applyLocked performs a namespace operation on the current entries and
// queues it until a SyncDir makes it durable.
func (m *MemFS) applyLocked(effects ...dirEffect) {
	now := time.Now()
	for _, e := range effects {
		if e.node == nil {
			delete(e.dir.entries, e.name)
		} else {
			e.dir.entries[e.name] = e.node
		}
		e.dir.modTime = now
	}
	m.pending = append(m.pending, &dirOp{effects: effects})
}

// Create implements [FS]: creates or truncates name, opened read-write.
func (m *MemFS) Create(name string) (File, error) { return m.create(name, false) }

// CreateExclusive implements [FS]: creates name, which must not exist,
// opened read-write. MemFS keeps no permissions: perm is not recorded.
func (m *MemFS) CreateExclusive(name string, perm os.FileMode) (File, error) {
	return m.create(name, true)
}

// create creates name or, unless excl, truncates it; with excl anything
// at name fails with EEXIST (matching fs.ErrExist), as O_EXCL does.
func (m *MemFS) create(name string, excl bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupLocked("open", name)
	if err != nil {
		return nil, err
	}
	if d == nil {
		if excl {
			return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EEXIST}
		}
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	n, ok := d.entries[base]
	switch {
	case ok && excl:
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EEXIST}
	case ok && n.dir:
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	case ok:
		n.pullLocked()
		n.truncateLocked(0)
	default:
		n = &memNode{modTime: time.Now()}
		m.applyLocked(dirEffect{dir: d, name: base, node: n})
	}
	return &memFile{fs: m, node: n, name: name, write: true}, nil
}

// Open implements [FS]: opens an existing file read-only.
func (m *MemFS) Open(name string) (File, error) { return m.open(name, false) }

// OpenReadWrite implements [FS]: opens an existing file read-write.
func (m *MemFS) OpenReadWrite(name string) (File, error) { return m.open(name, true) }

func (m *MemFS) open(name string, write bool) (File, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.nodeLocked("open", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		// The OS opens directories read-only; nothing in storage needs a
		// directory handle (SyncDir takes a path), so MemFS refuses.
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	return &memFile{fs: m, node: n, name: name, write: write}, nil
}

// Remove implements [FS]: removes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupLocked("remove", name)
	if err != nil {
		return err
	}
	if d == nil {
		return &os.PathError{Op: "remove", Path: name, Err: syscall.EBUSY}
	}
	n, ok := d.entries[base]
	if !ok {
		return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOENT}
	}
	if n.dir && len(n.entries) > 0 {
		return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	m.applyLocked(dirEffect{dir: d, name: base})
	return nil
}

// RemoveAll implements [FS]: removes name and everything below it; a
// missing name is not an error. The subtree is unlinked with one operation,
// so a crash before SyncDir of the parent brings back the subtree as it was
// durable.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupLocked("unlinkat", name)
	if err != nil {
		if pe, ok := err.(*os.PathError); ok && pe.Err == syscall.ENOENT {
			return nil
		}
		return err
	}
	if d == nil {
		return &os.PathError{Op: "unlinkat", Path: name, Err: syscall.EBUSY}
	}
	if _, ok := d.entries[base]; !ok {
		return nil
	}
	m.applyLocked(dirEffect{dir: d, name: base})
	return nil
}

// Rename implements [FS]: atomically renames oldname to newname, replacing
// a file (or an empty directory) at newname. The rename is durable once
// SyncDir is called on either parent directory.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	linkErr := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	od, obase, err := m.lookupLocked("rename", oldname)
	if err != nil {
		return linkErr(syscall.ENOENT)
	}
	nd, nbase, err := m.lookupLocked("rename", newname)
	if err != nil {
		return linkErr(err.(*os.PathError).Err)
	}
	if od == nil || nd == nil {
		return linkErr(syscall.EBUSY)
	}
	n, ok := od.entries[obase]
	if !ok {
		return linkErr(syscall.ENOENT)
	}
	if od == nd && obase == nbase {
		return nil
	}
	if old, ok := nd.entries[nbase]; ok {
		switch {
		case old == n:
			return nil
		case n.dir && !old.dir:
			return linkErr(syscall.ENOTDIR)
		case !n.dir && old.dir:
			return linkErr(syscall.EISDIR)
		case old.dir && len(old.entries) > 0:
			return linkErr(syscall.ENOTEMPTY)
		}
	}
	if n.dir {
		// A directory cannot move below itself.
		op, np := split(oldname), split(newname)
		if len(np) > len(op) && strings.Join(np[:len(op)], "/") == strings.Join(op, "/") {
			return linkErr(syscall.EINVAL)
		}
	}
	m.applyLocked(dirEffect{dir: od, name: obase}, dirEffect{dir: nd, name: nbase, node: n})
	return nil
}

// MkdirAll implements [FS]. Each directory it creates is a pending
// namespace operation in its parent, durable after SyncDir of the parent.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.root
	for _, p := range split(dir) {
		n, ok := d.entries[p]
		if !ok {
			n = newMemDir()
			m.applyLocked(dirEffect{dir: d, name: p, node: n})
		} else if !n.dir {
			return &os.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		d = n
	}
	return nil
}

// List implements [FS].
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.nodeLocked("open", dir)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &os.PathError{Op: "readdirent", Path: dir, Err: syscall.ENOTDIR}
	}
	names := make([]string, 0, len(n.entries))
	for name := range n.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// Stat implements [FS].
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.nodeLocked("stat", name)
	if err != nil {
		return nil, err
	}
	base := path.Base(path.Clean("/" + name))
	return n.infoLocked(base), nil
}

// SyncDir implements [FS]: it makes durable every pending namespace
// operation that touched dir (see [MemFS] for the exact rule).
func (m *MemFS) SyncDir(dir string) error {
	m.noteSync(dir, true)
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.nodeLocked("open", dir)
	if err != nil {
		return err
	}
	if !d.dir {
		// fsync on a file opened by path works on the OS too.
		d.commitDataLocked()
		return nil
	}
	// Walk back from the newest operation, committing those that touch
	// dir and, transitively, every earlier one that touched a slot a
	// committed one touches: a rename is never durable while the create of
	// its source could still come back.
	type slot struct {
		dir  *memNode
		name string
	}
	pinned := map[slot]bool{}
	commit := make([]bool, len(m.pending))
	for i := len(m.pending) - 1; i >= 0; i-- {
		for _, e := range m.pending[i].effects {
			if e.dir == d || pinned[slot{e.dir, e.name}] {
				commit[i] = true
			}
		}
		if commit[i] {
			for _, e := range m.pending[i].effects {
				pinned[slot{e.dir, e.name}] = true
			}
		}
	}
	rest := m.pending[:0:0]
	for i, op := range m.pending {
		if !commit[i] {
			rest = append(rest, op)
			continue
		}
		for _, e := range op.effects {
			if e.node == nil {
				delete(e.dir.durable, e.name)
			} else {
				e.dir.durable[e.name] = e.node
			}
		}
	}
	m.pending = rest
	return nil
}

// Dump renders the tree with each file's current and synced size and
// whether its name is durable, for test failure messages.
func (m *MemFS) Dump() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var sb strings.Builder
	var walk func(d *memNode, prefix string)
	walk = func(d *memNode, prefix string) {
		names := make([]string, 0, len(d.entries))
		for k := range d.entries {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			n := d.entries[k]
			durable := ""
			if d.durable[k] != n {
				durable = " (name not durable)"
			}
			if n.dir {
				fmt.Fprintf(&sb, "%s%s/%s\n", prefix, k, durable)
				walk(n, prefix+"  ")
				continue
			}
			fmt.Fprintf(&sb, "%s%s size=%d synced=%d%s\n", prefix, k, len(n.data), len(n.synced), durable)
		}
	}
	walk(m.root, "")
	return sb.String()
}
