package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
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
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupLocked("open", name)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	n, ok := d.entries[base]
	switch {
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

// Clone returns an exact copy of the file system, including what is not
// yet durable, so several crashes can be taken from one moment. Open
// handles and mappings are not carried over.
func (m *MemFS) Clone() *MemFS {
	m.mu.Lock() // pull mutates detached mappings' nodes
	defer m.mu.Unlock()
	c := &cloner{old: map[*memNode]*memNode{}}
	out := &MemFS{root: c.node(m.root)}
	out.free.Store(m.free.Load())
	for _, op := range m.pending {
		nop := &dirOp{}
		for _, e := range op.effects {
			ne := dirEffect{dir: c.node(e.dir), name: e.name}
			if e.node != nil {
				ne.node = c.node(e.node)
			}
			nop.effects = append(nop.effects, ne)
		}
		out.pending = append(out.pending, nop)
	}
	return out
}

type cloner struct{ old map[*memNode]*memNode }

func (c *cloner) node(n *memNode) *memNode {
	if nn, ok := c.old[n]; ok {
		return nn
	}
	nn := &memNode{dir: n.dir, modTime: n.modTime}
	c.old[n] = nn
	if n.dir {
		nn.entries = make(map[string]*memNode, len(n.entries))
		nn.durable = make(map[string]*memNode, len(n.durable))
		for k, v := range n.entries {
			nn.entries[k] = c.node(v)
		}
		for k, v := range n.durable {
			nn.durable[k] = c.node(v)
		}
		return nn
	}
	n.pullLocked()
	nn.data = clone(n.data)
	nn.synced = clone(n.synced)
	nn.mapDirty = n.mapDirty
	nn.ops = make([]memOp, len(n.ops))
	for i, op := range n.ops {
		nn.ops[i] = memOp{off: op.off, data: clone(op.data), trunc: op.trunc, size: op.size}
	}
	return nn
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// CrashClone returns a new file system holding what a power loss at this
// moment would leave behind (see [MemFS] for the model). keepUnsyncedPct
// (0..100) sets how much of what was never synced survives: 0 keeps only
// synced bytes and entries, 100 keeps everything; in between each file
// keeps a random prefix of its unsynced writes, on average about
// keepUnsyncedPct percent of their bytes, and each pending namespace
// operation survives with probability keepUnsyncedPct percent.
//
// In the clone everything is durable and nothing is open. The receiver is
// unchanged.
func (m *MemFS) CrashClone(keepUnsyncedPct int, rng *rand.Rand) *MemFS {
	return m.crashClone(keepUnsyncedPct, rng, false)
}

// CrashCloneReordered is [MemFS.CrashClone] under a harsher model of file
// contents, closer to a disk whose write-back reorders: every 4 KiB page
// that changed since the file's last Sync independently keeps its new or
// its synced contents (with probability keepUnsyncedPct percent for the
// new), and the file's size is its size after a random prefix of the
// unsynced writes and truncations, so a later page can survive while an
// earlier one is lost, leaving a hole of old bytes or zeros in the middle.
// Directory entries follow the CrashClone model.
func (m *MemFS) CrashCloneReordered(keepUnsyncedPct int, rng *rand.Rand) *MemFS {
	return m.crashClone(keepUnsyncedPct, rng, true)
}

func (m *MemFS) crashClone(keepUnsyncedPct int, rng *rand.Rand, reorder bool) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	pct := min(max(keepUnsyncedPct, 0), 100)
	keep := func() bool {
		return pct >= 100 || (pct > 0 && rng.IntN(100) < pct)
	}

	// The directory entries as found after the crash: durable ones, then
	// the surviving pending operations in issue order.
	after := map[*memNode]map[string]*memNode{}
	var entries func(d *memNode) map[string]*memNode
	entries = func(d *memNode) map[string]*memNode {
		e, ok := after[d]
		if !ok {
			e = make(map[string]*memNode, len(d.durable))
			for k, v := range d.durable {
				e[k] = v
			}
			after[d] = e
		}
		return e
	}
	for _, op := range m.pending {
		if !keep() {
			continue
		}
		for _, ef := range op.effects {
			e := entries(ef.dir)
			if ef.node == nil {
				delete(e, ef.name)
			} else {
				e[ef.name] = ef.node
			}
		}
	}

	built := map[*memNode]*memNode{}
	var build func(n *memNode) *memNode
	build = func(n *memNode) *memNode {
		if nn, ok := built[n]; ok {
			return nn
		}
		if n.dir {
			nn := newMemDir()
			nn.modTime = n.modTime
			built[n] = nn
			// Sorted, so a seeded rng tears the same files the same way.
			e := entries(n)
			names := make([]string, 0, len(e))
			for k := range e {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				c := build(e[k])
				nn.entries[k] = c
				nn.durable[k] = c
			}
			return nn
		}
		var data []byte
		if reorder {
			data = n.crashPagesLocked(pct, rng)
		} else {
			data = n.crashContentLocked(pct, rng)
		}
		nn := &memNode{modTime: n.modTime, data: data, synced: clone(data)}
		built[n] = nn
		return nn
	}
	out := &MemFS{root: build(m.root)}
	out.free.Store(m.free.Load())
	return out
}

// crashContentLocked computes a file's contents after a crash.
func (n *memNode) crashContentLocked(pct int, rng *rand.Rand) []byte {
	n.pullLocked()
	out := clone(n.synced)
	if pct <= 0 {
		return out
	}
	var total int64
	for _, op := range n.ops {
		total += int64(len(op.data))
	}
	// The budget is uniform on an interval whose mean is pct% of the
	// unsynced bytes: [0, 2·pct%] up to 50%, [2·pct%-100%, 100%] above.
	budget := total
	if pct < 100 && total > 0 {
		lo, hi := int64(0), 2*total*int64(pct)/100
		if pct > 50 {
			lo, hi = (2*int64(pct)-100)*total/100, total
		}
		budget = lo + rng.Int64N(hi-lo+1)
	}
	for _, op := range n.ops {
		if op.trunc {
			out = resize(out, op.size)
			continue
		}
		d := op.data
		if int64(len(d)) > budget {
			d = d[:budget] // torn
		}
		out = writeAt(out, d, op.off)
		budget -= int64(len(d))
		if len(d) < len(op.data) {
			break
		}
	}
	if n.mapDirty {
		// Pages dirtied through a mapping are written back independently.
		full := clone(n.synced)
		for _, op := range n.ops {
			if op.trunc {
				full = resize(full, op.size)
			} else {
				full = writeAt(full, op.data, op.off)
			}
		}
		for p := 0; p < len(n.data) && p < len(out); p += memPageSize {
			e := min(p+memPageSize, len(n.data), len(out))
			var was []byte
			if p < len(full) {
				was = full[p:min(e, len(full))]
			}
			if string(n.data[p:e]) != string(was) && (pct >= 100 || rng.IntN(100) < pct) {
				copy(out[p:e], n.data[p:e])
			}
		}
	}
	return out
}

// crashPagesLocked computes a file's contents after a crash under the
// reordering model of CrashCloneReordered.
func (n *memNode) crashPagesLocked(pct int, rng *rand.Rand) []byte {
	n.pullLocked()
	if pct <= 0 || (len(n.ops) == 0 && !n.mapDirty) {
		return clone(n.synced)
	}
	if pct >= 100 {
		return clone(n.data)
	}
	// The size: as after the first k unsynced operations.
	size := int64(len(n.synced))
	k := rng.IntN(len(n.ops) + 1)
	for _, op := range n.ops[:k] {
		if op.trunc {
			size = op.size
		} else {
			size = max(size, op.off+int64(len(op.data)))
		}
	}
	out := make([]byte, size)
	copy(out, n.synced)
	for p := int64(0); p < size; p += memPageSize {
		e := min(p+memPageSize, size)
		var cur, old []byte
		if p < int64(len(n.data)) {
			cur = n.data[p:min(e, int64(len(n.data)))]
		}
		if p < int64(len(n.synced)) {
			old = n.synced[p:min(e, int64(len(n.synced)))]
		}
		if string(cur) == string(old) || rng.IntN(100) >= pct {
			continue // the page as synced (or zeros past the synced end)
		}
		clear(out[p:e])
		copy(out[p:e], cur)
	}
	return out
}

// resize returns b grown with zeros or shrunk to size.
func resize(b []byte, size int64) []byte {
	if size <= int64(len(b)) {
		return b[:size]
	}
	if size <= int64(cap(b)) {
		old := len(b)
		b = b[:size]
		clear(b[old:])
		return b
	}
	// Double, as append does: files grow mostly by appending, and a
	// smaller factor made a 4 KiB append cost a copy of the whole file
	// every few calls.
	nb := make([]byte, size, max(size, 2*int64(cap(b)), 4096))
	copy(nb, b)
	return nb
}

// writeAt writes p at off into b, growing b with zeros as needed.
func writeAt(b, p []byte, off int64) []byte {
	if end := off + int64(len(p)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[off:], p)
	return b
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

// File-level operations. The node's contents are guarded by MemFS.mu.

func (n *memNode) infoLocked(name string) os.FileInfo {
	mode := os.FileMode(0o644)
	var size int64
	if n.dir {
		mode = fs.ModeDir | 0o755
		size = 4096
	} else {
		size = int64(len(n.data))
	}
	return memInfo{name: name, size: size, mode: mode, modTime: n.modTime}
}

// pullLocked copies detached mappings into data, so bytes written through
// them are seen.
func (n *memNode) pullLocked() {
	for _, m := range n.mappings {
		if m.detached {
			copy(n.data, m.b)
		}
	}
}

func (n *memNode) hasDetachedLocked() bool {
	for _, m := range n.mappings {
		if m.detached {
			return true
		}
	}
	return false
}

// pushLocked copies data[off:off+size] into the detached mappings.
func (n *memNode) pushLocked(off, size int64) {
	for _, m := range n.mappings {
		if m.detached && off < int64(len(m.b)) {
			copy(m.b[off:], n.data[off:min(off+size, int64(len(n.data)))])
		}
	}
}

// growLocked makes data at least size long. If that needs a new array, the
// mappings aliasing the old one become detached.
func (n *memNode) growLocked(size int64) {
	if size <= int64(len(n.data)) {
		return
	}
	if size > int64(cap(n.data)) {
		for _, m := range n.mappings {
			m.detached = true
		}
	}
	old := len(n.data)
	n.data = resize(n.data, size)
	n.pushLocked(int64(old), size-int64(old))
}

func (n *memNode) writeLocked(p []byte, off int64) {
	n.pullLocked()
	n.growLocked(off + int64(len(p)))
	copy(n.data[off:], p)
	n.pushLocked(off, int64(len(p)))
	n.ops = append(n.ops, memOp{off: off, data: clone(p)})
	n.modTime = time.Now()
}

func (n *memNode) truncateLocked(size int64) {
	if size < int64(len(n.data)) {
		n.data = n.data[:size]
	} else {
		n.growLocked(size)
	}
	n.ops = append(n.ops, memOp{trunc: true, size: size})
	n.modTime = time.Now()
}

// commitDataLocked makes the current contents durable.
func (n *memNode) commitDataLocked() {
	if n.dir {
		return
	}
	n.pullLocked()
	if n.mapDirty || len(n.ops) == 0 {
		n.synced = append(n.synced[:0], n.data...)
	} else {
		for _, op := range n.ops {
			if op.trunc {
				n.synced = resize(n.synced, op.size)
			} else {
				n.synced = writeAt(n.synced, op.data, op.off)
			}
		}
	}
	n.ops = nil
	n.mapDirty = len(n.mappings) > 0
}

type memInfo struct {
	name    string
	size    int64
	mode    os.FileMode
	modTime time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() os.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return i.modTime }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

// memFile is an open handle on a memNode.
type memFile struct {
	fs    *MemFS
	node  *memNode
	name  string
	write bool

	// mu guards pos and closed.
	mu     sync.Mutex
	pos    int64
	closed bool
}

func (f *memFile) checkLocked(op string, write bool) error {
	if f.closed {
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	}
	if write && !f.write {
		return &os.PathError{Op: op, Path: f.name, Err: syscall.EBADF}
	}
	return nil
}

func (f *memFile) check(op string, write bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.checkLocked(op, write)
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked("read", false); err != nil {
		return 0, err
	}
	n, err := f.readAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "readat", Path: f.name, Err: syscall.EINVAL}
	}
	return f.readAt(p, off)
}

func (f *memFile) readAt(p []byte, off int64) (int, error) {
	f.fs.mu.RLock()
	if f.node.hasDetachedLocked() {
		// Pulling writes data: take the lock exclusively.
		f.fs.mu.RUnlock()
		f.fs.mu.Lock()
		defer f.fs.mu.Unlock()
		f.node.pullLocked()
	} else {
		defer f.fs.mu.RUnlock()
	}
	if off >= int64(len(f.node.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked("write", true); err != nil {
		return 0, err
	}
	f.fs.mu.Lock()
	f.node.writeLocked(p, f.pos)
	f.fs.mu.Unlock()
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "writeat", Path: f.name, Err: syscall.EINVAL}
	}
	f.fs.mu.Lock()
	f.node.writeLocked(p, off)
	f.fs.mu.Unlock()
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.node.pullLocked()
	f.node.truncateLocked(size)
	return nil
}

func (f *memFile) Sync() error {
	if err := f.check("sync", false); err != nil {
		return err
	}
	f.fs.noteSync(f.name, false)
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.node.commitDataLocked()
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	if err := f.check("stat", false); err != nil {
		return nil, err
	}
	f.fs.mu.RLock()
	defer f.fs.mu.RUnlock()
	return f.node.infoLocked(path.Base(path.Clean("/" + f.name))), nil
}

func (f *memFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	f.closed = true
	return nil
}

// Mmap implements [File]: the returned slice aliases the file's contents,
// so reads through it see later writes to the file and writes through it
// are seen by ReadAt (and survive a crash only once synced).
func (f *memFile) Mmap(length int) ([]byte, error) {
	if err := f.check("mmap", false); err != nil {
		return nil, err
	}
	if length == 0 {
		return nil, nil
	}
	if !f.write {
		// PROT_WRITE on a read-only descriptor, as the OS refuses it.
		return nil, &os.PathError{Op: "mmap", Path: f.name, Err: syscall.EACCES}
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	n := f.node
	if length < 0 || int64(length) > int64(len(n.data)) {
		return nil, &os.PathError{Op: "mmap", Path: f.name, Err: syscall.EINVAL}
	}
	n.pullLocked()
	b := n.data[:length:length]
	n.mappings = append(n.mappings, &memMap{b: b})
	n.mapDirty = true
	return b, nil
}

// Munmap implements [File].
func (f *memFile) Munmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	n := f.node
	n.pullLocked()
	for i, m := range n.mappings {
		if &m.b[0] == &b[0] && len(m.b) == len(b) {
			n.mappings = append(n.mappings[:i:i], n.mappings[i+1:]...)
			return nil
		}
	}
	return &os.PathError{Op: "munmap", Path: f.name, Err: syscall.EINVAL}
}
