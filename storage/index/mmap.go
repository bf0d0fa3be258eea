package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	iofs "io/fs"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/strata-io/strata/storage/vfs"
)

// ErrIndexFull is returned by Append when the index has no free slot: its
// preallocated size is used up, or it was sealed (a sealed index is trimmed
// to its entries). The log rolls the segment when it sees it.
var ErrIndexFull = errors.New("index: index is full")

// ErrCorruptIndex is wrapped by SanityCheck when an index file breaks the
// format's invariants (entries out of order, a size that is not a whole
// number of entries, offsets outside the segment). The caller rebuilds the
// index from its segment.
var ErrCorruptIndex = errors.New("index: corrupt index")

// ErrInvalidEntry is returned by Append for an entry that would break the
// index's order: an offset not above the last entry's (offset index), an
// offset below the last entry's (time index), an offset outside the
// segment's 32-bit relative range, or a negative or decreasing position.
// Nothing is written.
var ErrInvalidEntry = errors.New("index: invalid entry")

// ErrClosed is returned by every mutating method of a closed index.
var ErrClosed = errors.New("index: index is closed")

// warmBytes is the size of the tail of an index that lookups search first
// when the target lies in it. Almost every lookup (tail fetches, follower
// fetches, appends) targets the last few entries; searching them first keeps
// the pages those lookups touch to the last two, so they stay in the page
// cache even when the head of a large index has been evicted (Kafka's
// "warm section", KAFKA-6432). 8 KiB = two pages = 1024 offset entries.
// BenchmarkOffsetIndexLookup measures the search itself with a hot page
// cache (1.3 M entries, a loaded 2-core VM): 2.4 µs per random lookup with
// or without the warm section, 0.4-0.6 µs per tail lookup either way. So it
// costs nothing measurable and its benefit is only the one above, under
// memory pressure, as in Kafka.
const warmBytes = 8192

// useWarmSection switches the warm-section search on; benchmarks turn it
// off to measure what it buys.
var useWarmSection = true

// mmapIndex is the part both indexes share: a file of fixed-size entries,
// preallocated and mapped, of which the first n are in use.
//
// File layout (both kinds): a sequence of fixed-size entries, no header.
//
//	+---------+---------+-----+-----------+-------------------------------+
//	| entry 0 | entry 1 | ... | entry n-1 | zero-filled free slots ...    |
//	+---------+---------+-----+-----------+-------------------------------+
//	0                                     n*size          capacity*size = file size
//
// While a segment is active its index file is preallocated (sparse, zeros)
// to segment.index.bytes; Seal and Close trim it to n*size. The count n is
// therefore not stored anywhere: on open it is the number of slots up to
// the last non-zero one. That is unambiguous because, in both layouts, only
// entry 0 can be all zeros (entry i > 0 has a relative offset, or a
// timestamp, strictly greater than entry 0's), and an all-zero entry 0 with
// nothing after it says no more than an empty index does (a lookup answers
// the segment's base offset and position 0 either way), so it may be read
// back as "no entries". TruncateTo and Reset zero the slots they free, so
// the rule also holds after them.
//
// Locking. Lock order: wmu, then mapMu.
//   - wmu serializes every mutating method. Append takes only wmu: it writes
//     into free slots no reader looks at, then publishes n with an atomic
//     store, so readers never wait for it.
//   - mapMu guards the mapping itself (f, mmap, closed) and the contents of
//     published slots. Readers hold it shared while they look at the
//     mapping. Methods that remap (Seal, Resize, Close) or rewrite published
//     slots (TruncateTo, Reset) take it exclusively, after wmu. Sync takes
//     it shared, alone, so an fsync holds up neither appends nor lookups.
type mmapIndex struct {
	fs         vfs.FS
	path       string
	baseOffset int64
	entrySize  int

	// wmu serializes writers; guards sealed and tornTail, and the writer's
	// access to mmap and err (which only change while both wmu and mapMu
	// are held).
	wmu      sync.Mutex
	sealed   bool
	tornTail int64 // file size on open when it was not a whole number of entries, else 0
	backed   int64 // bytes from 0 known allocated on disk (written, not a hole): stores below it cannot fault
	err      error // latched when a remap failed: the index is unusable

	// mapMu guards f, mmap, closed and err against remapping, and
	// published slots against rewriting (see the type comment).
	mapMu  sync.RWMutex
	f      vfs.File
	mmap   []byte
	closed bool

	n        atomic.Int64 // published entries; slots [0, n) are readable
	capacity atomic.Int64 // slots the mapping holds
}

func openMmapIndex(fs vfs.FS, path string, baseOffset int64, maxBytes, entrySize int, kind string) (*mmapIndex, error) {
	return openMmapIndexAtMost(fs, path, baseOffset, maxBytes, entrySize, 0, kind)
}

// openMmapIndexAtMost is openMmapIndex counting entries only in the first
// maxEntries slots (0: all of them).
func openMmapIndexAtMost(fs vfs.FS, path string, baseOffset int64, maxBytes, entrySize, maxEntries int, kind string) (*mmapIndex, error) {
	if baseOffset < 0 {
		return nil, fmt.Errorf("index: open %s: negative base offset %d", path, baseOffset)
	}
	f, err := fs.OpenReadWrite(path)
	if errors.Is(err, iofs.ErrNotExist) {
		f, err = fs.Create(path)
	}
	if err != nil {
		return nil, fmt.Errorf("index: open %s %s: %w", kind, path, err)
	}
	m := &mmapIndex{fs: fs, path: path, baseOffset: baseOffset, entrySize: entrySize, f: f}
	if err := m.load(maxBytes, int64(maxEntries)); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("index: open %s %s: %w", kind, path, err)
	}
	return m, nil
}

// load sizes and maps a freshly opened file and counts its entries.
func (m *mmapIndex) load(maxBytes int, maxEntries int64) error {
	st, err := m.f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	es := int64(m.entrySize)
	if size%es != 0 {
		// A torn or foreign file. Keep the whole entries and drop the
		// fragment now, before growing the file could leave it inside a
		// slot; SanityCheck reports the damage.
		m.tornTail = size
		size -= size % es
		if err := m.f.Truncate(size); err != nil {
			return err
		}
	}
	slots := max(int64(maxBytes)/es, size/es)
	if slots > int64(maxInt32) {
		return fmt.Errorf("index size %d bytes too large", slots*es)
	}
	// Only an existing file has entries to count (scanning a freshly
	// preallocated one cost 20 ms per index on every roll before this
	// check). The scan reads the file rather than the mapping: faulting in
	// the 2,560 pages of a crash-left 10 MiB index took 17-35 ms per open
	// (BenchmarkOffsetIndexOpenUnclean); reading it in 64 KiB chunks takes
	// a fraction of that.
	var n int64
	if scan := min(size, slots*es); scan > 0 {
		if maxEntries > 0 {
			scan = min(scan, maxEntries*es)
		}
		if n, err = countEntriesInFile(m.f, scan, m.entrySize); err != nil {
			return err
		}
	}
	if slots*es != size {
		if err := m.f.Truncate(slots * es); err != nil {
			return err
		}
	}
	mm, err := m.f.Mmap(int(slots * es))
	if err != nil {
		return err
	}
	m.mmap = mm
	m.capacity.Store(slots)
	m.n.Store(n)
	m.backed = n * es // the counted entries were written; past them may be holes
	return nil
}

// countEntriesInFile applies countEntries to the first size bytes of f,
// reading backwards in chunks and stopping at the first chunk that is not
// all zeros.
func countEntriesInFile(f vfs.File, size int64, entrySize int) (int64, error) {
	buf := make([]byte, min(size, 64<<10))
	for end := size; end > 0; {
		start := max(0, end-int64(len(buf)))
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil {
			return 0, err
		}
		if used := countEntries(chunk, 1); used > 0 {
			return (start + used + int64(entrySize) - 1) / int64(entrySize), nil
		}
		end = start
	}
	return 0, nil
}

// countEntries returns the number of slots up to and including the last
// one that is not all zeros (see the layout comment on mmapIndex). It scans
// from the end eight bytes at a time, then byte by byte.
func countEntries(b []byte, entrySize int) int64 {
	i := len(b)
	for i >= 8 {
		if be.Uint64(b[i-8:i]) != 0 {
			break
		}
		i -= 8
	}
	for i > 0 && b[i-1] == 0 {
		i--
	}
	return int64((i + entrySize - 1) / entrySize)
}

// readView returns the published entries' bytes with mapMu held shared;
// the caller must call m.mapMu.RUnlock when done with them.
func (m *mmapIndex) readView() (b []byte, n int) {
	m.mapMu.RLock()
	n = int(m.n.Load())
	if m.closed || n == 0 {
		return nil, 0
	}
	return m.mmap[:n*m.entrySize], n
}

// usableLocked returns the error a mutating method must fail with, if
// any. wmu or mapMu (shared or exclusive) held.
func (m *mmapIndex) usableLocked() error {
	if m.err != nil {
		return m.err
	}
	if m.closed {
		return ErrClosed
	}
	return nil
}

// appendSlotLocked returns the next free slot's bytes, or ErrIndexFull. wmu held.
func (m *mmapIndex) appendSlotLocked() ([]byte, error) {
	if err := m.usableLocked(); err != nil {
		return nil, err
	}
	n := m.n.Load()
	if n >= m.capacity.Load() {
		if m.sealed {
			return nil, fmt.Errorf("%w: %s is sealed", ErrIndexFull, m.path)
		}
		return nil, fmt.Errorf("%w: %s holds %d entries", ErrIndexFull, m.path, n)
	}
	off := int(n) * m.entrySize
	return m.mmap[off : off+m.entrySize], nil
}

// appendLocked writes entry into the next free slot and publishes it.
// wmu held.
//
// The file is sparse (preallocated by truncation), so the first store into
// one of its pages makes the file system allocate that page, and on a
// full disk that fault is SIGBUS, which kills the process (it did, in a
// recovery on a full disk). So before the first store into a page, the
// free bytes from the slot to the end of the page are written (zeros,
// with a positioned write): that allocates the page or fails with ENOSPC,
// leaving nothing published. Once per page (512 offset entries): the
// stores themselves stay plain memory writes.
func (m *mmapIndex) appendLocked(entry []byte) error {
	slot, err := m.appendSlotLocked()
	if err != nil {
		return err
	}
	off := m.n.Load() * int64(m.entrySize)
	if end := off + int64(len(entry)); end > m.backed {
		if err := m.backLocked(off, end); err != nil {
			return err
		}
	}
	copy(slot, entry)
	m.publishLocked()
	return nil
}

// backLocked makes the file system allocate the pages holding [off, end)
// by writing zeros over the free bytes from off to the end of end's page
// (never past the file's size). wmu held; off is the first free slot.
func (m *mmapIndex) backLocked(off, end int64) error {
	ps := int64(pageSize)
	to := min((end+ps-1)/ps*ps, m.capacity.Load()*int64(m.entrySize))
	for p := off; p < to; {
		k := min(to-p, int64(len(zeroPage)))
		if _, err := m.f.WriteAt(zeroPage[:k], p); err != nil {
			return fmt.Errorf("index: allocate %s at %d: %w", m.path, p, err)
		}
		p += k
	}
	m.backed = to
	return nil
}

// pageSize is the granularity at which a store into a shared mapping
// makes the file system allocate.
var pageSize = syscall.Getpagesize()

var zeroPage = make([]byte, 64<<10)

// lastSlotLocked returns the last published entry's bytes, or nil. wmu held.
func (m *mmapIndex) lastSlotLocked() []byte {
	n := int(m.n.Load())
	if n == 0 {
		return nil
	}
	return m.mmap[(n-1)*m.entrySize : n*m.entrySize]
}

// publishLocked makes the entry just written to the next free slot visible
// to readers. The atomic store orders the entry's bytes before the count.
func (m *mmapIndex) publishLocked() { m.n.Add(1) }

// truncateEntries drops every entry from slot k on, zeroing the freed slots
// so that a reopen counts the same entries (see the layout comment).
func (m *mmapIndex) truncateEntries(k func(b []byte, n int) int) error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if err := m.usableLocked(); err != nil {
		return err
	}
	m.mapMu.Lock()
	defer m.mapMu.Unlock()
	n := int(m.n.Load())
	keep := k(m.mmap[:n*m.entrySize], n)
	if keep >= n {
		return nil
	}
	clear(m.mmap[keep*m.entrySize : n*m.entrySize])
	m.n.Store(int64(keep))
	return nil
}

// remapLocked unmaps the file, resizes it to slots entries and maps it
// again. wmu and mapMu (exclusive) held. On failure the index latches into
// an unusable state with no entries, which readers see as "no entries"
// (lookups answer the segment's start: slower for the caller, never wrong).
func (m *mmapIndex) remapLocked(slots int64) error {
	if err := m.f.Munmap(m.mmap); err != nil {
		return m.failLocked(fmt.Errorf("index: unmap %s: %w", m.path, err))
	}
	m.mmap = nil
	size := slots * int64(m.entrySize)
	if err := m.f.Truncate(size); err != nil {
		return m.failLocked(fmt.Errorf("index: resize %s to %d bytes: %w", m.path, size, err))
	}
	mm, err := m.f.Mmap(int(size))
	if err != nil {
		return m.failLocked(fmt.Errorf("index: map %s: %w", m.path, err))
	}
	m.mmap = mm
	m.capacity.Store(slots)
	m.backed = min(m.backed, size) // growing adds holes; shrinking drops pages
	return nil
}

func (m *mmapIndex) failLocked(err error) error {
	m.err = err
	m.mmap = nil
	m.n.Store(0)
	m.capacity.Store(0)
	return err
}

func (m *mmapIndex) seal() error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if err := m.usableLocked(); err != nil {
		return err
	}
	m.mapMu.Lock()
	defer m.mapMu.Unlock()
	n := m.n.Load()
	if n != m.capacity.Load() {
		if err := m.remapLocked(n); err != nil {
			return err
		}
	}
	m.sealed = true
	return nil
}

func (m *mmapIndex) resize(maxBytes int) error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if err := m.usableLocked(); err != nil {
		return err
	}
	m.mapMu.Lock()
	defer m.mapMu.Unlock()
	slots := max(int64(maxBytes)/int64(m.entrySize), m.n.Load())
	if slots > int64(maxInt32) {
		return fmt.Errorf("index: resize %s: %d bytes too large", m.path, maxBytes)
	}
	if slots != m.capacity.Load() {
		if err := m.remapLocked(slots); err != nil {
			return err
		}
	}
	m.sealed = false
	return nil
}

// sync holds mapMu shared, not wmu: the file cannot be closed or remapped
// under it, and appends (which take only wmu) go on during the fsync.
// err and closed only change with mapMu held exclusively, so reading them
// here is safe.
func (m *mmapIndex) sync() error {
	m.mapMu.RLock()
	defer m.mapMu.RUnlock()
	if err := m.usableLocked(); err != nil {
		return err
	}
	if err := m.f.Sync(); err != nil {
		return fmt.Errorf("index: sync %s: %w", m.path, err)
	}
	return nil
}

// close unmaps and trims the file to its entries (so a clean reopen need
// not scan the preallocated tail) and closes it. Idempotent. It does not
// sync: the log syncs what it needs before closing.
func (m *mmapIndex) close() error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.mapMu.Lock()
	defer m.mapMu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	if m.mmap != nil {
		if err := m.f.Munmap(m.mmap); err != nil {
			errs = append(errs, fmt.Errorf("index: unmap %s: %w", m.path, err))
		}
		m.mmap = nil
	}
	if m.err == nil && len(errs) == 0 {
		used := m.n.Load() * int64(m.entrySize)
		if used != m.capacity.Load()*int64(m.entrySize) {
			if err := m.f.Truncate(used); err != nil {
				errs = append(errs, fmt.Errorf("index: trim %s: %w", m.path, err))
			}
		}
	}
	if err := m.f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("index: close %s: %w", m.path, err))
	}
	m.n.Store(0)
	m.capacity.Store(0)
	return errors.Join(errs...)
}

func (m *mmapIndex) isFull() bool { return m.n.Load() >= m.capacity.Load() }

// sanityLocked checks what does not depend on the entry layout and returns
// the published entries' bytes for the caller to check. wmu held: with it,
// neither the mapping nor the published slots can change.
func (m *mmapIndex) sanityLocked() ([]byte, int, error) {
	if m.err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %v", ErrCorruptIndex, m.path, m.err)
	}
	if m.closed {
		return nil, 0, ErrClosed
	}
	if m.tornTail != 0 {
		return nil, 0, fmt.Errorf("%w: %s: file size %d is not a multiple of the entry size %d",
			ErrCorruptIndex, m.path, m.tornTail, m.entrySize)
	}
	n := int(m.n.Load())
	return m.mmap[:n*m.entrySize], n, nil
}

const maxInt32 = 1<<31 - 1

var be = binary.BigEndian

// relative converts an absolute offset to the 32-bit offset an entry
// stores, or reports that it does not fit.
func relative(base, offset int64) (uint32, bool) {
	r := offset - base
	if r < 0 || r > maxInt32 {
		return 0, false
	}
	return uint32(r), true
}
