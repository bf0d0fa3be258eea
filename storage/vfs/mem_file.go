package vfs

// MemFS's files: a node's contents (current bytes, synced bytes, the
// writes and truncations since the last Sync, Mmap mappings) and the
// memFile handle that reads, writes, syncs and maps them. The durability
// model is described on MemFS (mem.go); what a crash keeps of a node is
// computed in mem_crash.go.

import (
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"syscall"
	"time"
)

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
