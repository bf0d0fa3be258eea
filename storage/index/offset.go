package index

import (
	"fmt"
	"math"

	"github.com/strata-io/strata/storage/vfs"
)

// OffsetEntrySize is the size of one offset index entry.
//
// Entry layout (big-endian, Kafka's .index format):
//
//	0               4               8
//	+---------------+---------------+
//	| relative off  | position      |
//	| uint32        | int32         |
//	+---------------+---------------+
//
// relative off = offset - the segment's base offset (0 ≤ r ≤ MaxInt32);
// position = byte position in the segment's .log of the batch that holds
// that offset (the offset is the batch's base offset, or any offset the log
// chose within it). Relative offsets strictly increase; positions do not
// decrease.
const OffsetEntrySize = 8

// OffsetIndex is the sparse offset index of one segment: it maps some
// offsets of the segment to the position of their batch in the .log file.
// A lookup gives the greatest indexed offset at or below a target, from
// which the log scans forward.
//
// Safe for one writer (Append, TruncateTo, Reset, Seal, Resize, Sync,
// Close; concurrent writers are serialized) and any number of concurrent
// readers (Lookup, LastEntry, Entries, IsFull, SizeBytes), which never wait
// for Append. See the package doc and mmapIndex for the locking.
type OffsetIndex struct {
	m *mmapIndex
}

// OpenOffsetIndex opens the offset index file at path, creating it if it
// does not exist, for a segment whose first offset is baseOffset. The file
// is grown (sparsely) to maxBytes, rounded down to whole entries, if it is
// smaller; a larger file keeps its size. Existing entries are kept and
// counted as described on mmapIndex. Pass maxBytes = 0 to open a sealed
// segment's index at its current size without growing it.
//
// Opening does not validate the entries: call SanityCheck.
func OpenOffsetIndex(fs vfs.FS, path string, baseOffset int64, maxBytes int) (*OffsetIndex, error) {
	m, err := openMmapIndex(fs, path, baseOffset, maxBytes, OffsetEntrySize, "offset index")
	if err != nil {
		return nil, err
	}
	return &OffsetIndex{m: m}, nil
}

// OpenOffsetIndexAtMost is OpenOffsetIndex for a caller that knows no
// entry can lie at or past slot maxEntries (recovery: a segment of L
// bytes holds at most L/61 batches, so at most that many entries): only
// those slots are read to count the entries, the rest are taken as free.
// Counting a crash-left 10 MiB index reads 10 MiB of zeros, about 1.7 ms
// here, which was most of a 2,000-partition recovery's 12 s
// (BenchmarkRecoverAfterCrash kill9=true). maxEntries 0: no bound.
func OpenOffsetIndexAtMost(fs vfs.FS, path string, baseOffset int64, maxBytes, maxEntries int) (*OffsetIndex, error) {
	m, err := openMmapIndexAtMost(fs, path, baseOffset, maxBytes, OffsetEntrySize, maxEntries, "offset index")
	if err != nil {
		return nil, err
	}
	return &OffsetIndex{m: m}, nil
}

func offsetEntry(b []byte, i int) (rel uint32, pos int32) {
	e := b[i*OffsetEntrySize:]
	return be.Uint32(e), int32(be.Uint32(e[4:]))
}

// Append adds an entry mapping offset to position. offset must be above
// the last entry's offset and within 2^31-1 of the base offset, position
// non-negative and not below the last entry's: otherwise it returns an
// error wrapping ErrInvalidEntry. It returns ErrIndexFull when no slot is
// free and ErrClosed after Close. The entry is visible to Lookup when
// Append returns; it is durable after Sync.
func (ix *OffsetIndex) Append(offset int64, position int32) error {
	m := ix.m
	m.wmu.Lock()
	defer m.wmu.Unlock()
	rel, ok := relative(m.baseOffset, offset)
	if !ok {
		return fmt.Errorf("%w: offset %d outside segment %d of %s", ErrInvalidEntry, offset, m.baseOffset, m.path)
	}
	if position < 0 {
		return fmt.Errorf("%w: negative position %d in %s", ErrInvalidEntry, position, m.path)
	}
	if _, err := m.appendSlotLocked(); err != nil {
		return err
	}
	if last := m.lastSlotLocked(); last != nil {
		lrel, lpos := offsetEntry(last, 0)
		if rel <= lrel {
			return fmt.Errorf("%w: offset %d not above last entry %d in %s",
				ErrInvalidEntry, offset, m.baseOffset+int64(lrel), m.path)
		}
		if position < lpos {
			return fmt.Errorf("%w: position %d below last entry's %d in %s",
				ErrInvalidEntry, position, lpos, m.path)
		}
	}
	var e [OffsetEntrySize]byte
	be.PutUint32(e[:], rel)
	be.PutUint32(e[4:], uint32(position))
	return m.appendLocked(e[:])
}

// Lookup returns the greatest indexed offset at or below offset and its
// position in the .log, or (BaseOffset, 0) when there is none.
func (ix *OffsetIndex) Lookup(offset int64) (entryOffset int64, position int32) {
	m := ix.m
	if offset < m.baseOffset {
		return m.baseOffset, 0
	}
	t := uint32(min(offset-m.baseOffset, maxInt32))
	b, n := m.readView()
	defer m.mapMu.RUnlock()
	i := offsetFloor(b, n, t)
	if i < 0 {
		return m.baseOffset, 0
	}
	rel, pos := offsetEntry(b, i)
	return m.baseOffset + int64(rel), pos
}

// offsetFloor returns the greatest slot in [0, n) whose relative offset is
// at most t, or -1. It searches the warm tail first (see warmBytes).
func offsetFloor(b []byte, n int, t uint32) int {
	lo, hi := 0, n
	if warm := n - warmBytes/OffsetEntrySize; useWarmSection && warm > 0 {
		if rel, _ := offsetEntry(b, warm); rel <= t {
			lo = warm
		} else {
			hi = warm
		}
	}
	return offsetFloorIn(b, lo, hi, t)
}

// offsetFloorIn is the binary search over [lo, hi): the first slot whose
// relative offset exceeds t, minus one.
func offsetFloorIn(b []byte, lo, hi int, t uint32) int {
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if rel, _ := offsetEntry(b, mid); rel <= t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// Entries returns the number of entries.
func (ix *OffsetIndex) Entries() int { return int(ix.m.n.Load()) }

// LastEntry returns the last entry, if any.
func (ix *OffsetIndex) LastEntry() (offset int64, position int32, ok bool) {
	m := ix.m
	b, n := m.readView()
	defer m.mapMu.RUnlock()
	if n == 0 {
		return m.baseOffset, 0, false
	}
	rel, pos := offsetEntry(b, n-1)
	return m.baseOffset + int64(rel), pos, true
}

// IsFull reports whether Append would return ErrIndexFull.
func (ix *OffsetIndex) IsFull() bool { return ix.m.isFull() }

// TruncateTo removes every entry whose offset is at or above offset (the
// log truncated its tail there). The freed slots are zeroed.
func (ix *OffsetIndex) TruncateTo(offset int64) error {
	base := ix.m.baseOffset
	return ix.m.truncateEntries(func(b []byte, n int) int {
		if offset <= base {
			return 0
		}
		t := uint64(offset - base)
		if t > maxInt32 {
			return n
		}
		// Keep the entries below offset: those up to the floor of offset-1.
		return offsetFloorIn(b, 0, n, uint32(t-1)) + 1
	})
}

// Reset removes every entry.
func (ix *OffsetIndex) Reset() error {
	return ix.m.truncateEntries(func([]byte, int) int { return 0 })
}

// Seal trims the file to the entries it holds, for a segment that will take
// no more appends (roll). Appends after Seal fail with ErrIndexFull until
// Resize. Seal does not sync.
func (ix *OffsetIndex) Seal() error { return ix.m.seal() }

// Resize sets the index's capacity to maxBytes (rounded down to whole
// entries, never below the entries it holds) and makes it appendable again:
// it reopens a sealed index as the active one (after the log truncated back
// into its segment), or grows an index opened with maxBytes = 0.
func (ix *OffsetIndex) Resize(maxBytes int) error { return ix.m.resize(maxBytes) }

// Sync makes the entries durable.
func (ix *OffsetIndex) Sync() error { return ix.m.sync() }

// Close unmaps the index, trims the file to its entries and closes it. It
// does not sync. Later calls return nil; other methods return ErrClosed
// (lookups answer as if the index were empty).
func (ix *OffsetIndex) Close() error { return ix.m.close() }

// SanityCheck verifies the format's invariants over every entry: a file
// that holds whole entries, relative offsets that strictly increase and fit
// in 31 bits, positions that are non-negative and do not decrease. Any
// breach returns an error wrapping ErrCorruptIndex.
func (ix *OffsetIndex) SanityCheck() error {
	m := ix.m
	m.wmu.Lock()
	defer m.wmu.Unlock()
	b, n, err := m.sanityLocked()
	if err != nil {
		return err
	}
	var prevRel uint32
	var prevPos int32
	for i := range n {
		rel, pos := offsetEntry(b, i)
		switch {
		case rel > math.MaxInt32:
			return fmt.Errorf("%w: %s entry %d: relative offset %d out of range", ErrCorruptIndex, m.path, i, rel)
		case pos < 0:
			return fmt.Errorf("%w: %s entry %d: negative position %d", ErrCorruptIndex, m.path, i, pos)
		case i > 0 && rel <= prevRel:
			return fmt.Errorf("%w: %s entry %d: offset %d not above previous %d",
				ErrCorruptIndex, m.path, i, m.baseOffset+int64(rel), m.baseOffset+int64(prevRel))
		case i > 0 && pos < prevPos:
			return fmt.Errorf("%w: %s entry %d: position %d below previous %d", ErrCorruptIndex, m.path, i, pos, prevPos)
		}
		prevRel, prevPos = rel, pos
	}
	return nil
}

// Path returns the index file's path.
func (ix *OffsetIndex) Path() string { return ix.m.path }

// BaseOffset returns the segment's base offset.
func (ix *OffsetIndex) BaseOffset() int64 { return ix.m.baseOffset }

// SizeBytes returns the bytes the entries use (the file's size once sealed).
func (ix *OffsetIndex) SizeBytes() int { return ix.Entries() * OffsetEntrySize }
