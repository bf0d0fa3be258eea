package index

import (
	"fmt"

	"github.com/strata-io/strata/storage/vfs"
)

// TimeEntrySize is the size of one time index entry.
//
// Entry layout (big-endian, Kafka's .timeindex format):
//
//	0                               8               12
//	+-------------------------------+---------------+
//	| timestamp (ms)                | relative off  |
//	| int64                         | uint32        |
//	+-------------------------------+---------------+
//
// An entry says: the largest timestamp among the segment's records up to
// and including offset (base + relative off) is timestamp. Timestamps
// strictly increase from entry to entry (Append drops any entry that would
// not raise the maximum); relative offsets do not decrease.
const TimeEntrySize = 12

// NoTimestamp is the timestamp of a record without one (Kafka's
// RecordBatch.NO_TIMESTAMP), and LastEntry's timestamp for an empty index.
const NoTimestamp int64 = -1

// TimeIndex is the sparse time index of one segment, appended at the same
// cadence as its OffsetIndex: a lookup by timestamp gives an offset from
// which the log scans forward for the first record at or after it
// (ListOffsets by time, time-based retention uses the last entry).
//
// Concurrency as for OffsetIndex: one writer, lock-free concurrent readers.
type TimeIndex struct {
	m *mmapIndex
}

// OpenTimeIndex opens the time index file at path, creating it if it does
// not exist, sized as OpenOffsetIndex sizes its file.
func OpenTimeIndex(fs vfs.FS, path string, baseOffset int64, maxBytes int) (*TimeIndex, error) {
	m, err := openMmapIndex(fs, path, baseOffset, maxBytes, TimeEntrySize, "time index")
	if err != nil {
		return nil, err
	}
	return &TimeIndex{m: m}, nil
}

// OpenTimeIndexAtMost is OpenTimeIndex counting entries only in the first
// maxEntries slots, as OpenOffsetIndexAtMost.
func OpenTimeIndexAtMost(fs vfs.FS, path string, baseOffset int64, maxBytes, maxEntries int) (*TimeIndex, error) {
	m, err := openMmapIndexAtMost(fs, path, baseOffset, maxBytes, TimeEntrySize, maxEntries, "time index")
	if err != nil {
		return nil, err
	}
	return &TimeIndex{m: m}, nil
}

func timeEntry(b []byte, i int) (ts int64, rel uint32) {
	e := b[i*TimeEntrySize:]
	return int64(be.Uint64(e)), be.Uint32(e[8:])
}

// Append records that the segment's maximum timestamp up to offset is
// timestamp. If timestamp does not exceed the last entry's (or is
// NoTimestamp or below on an empty index) Append does nothing and returns
// nil: the index only records increases of the maximum. Otherwise offset
// must be within the segment and not below the last entry's offset
// (ErrInvalidEntry), and a slot other than the last must be free
// (ErrIndexFull): the last slot is kept for AppendFinal, as Kafka's
// TimeIndex keeps it (isFull is entries >= maxEntries-1).
func (ix *TimeIndex) Append(timestamp int64, offset int64) error {
	return ix.append(timestamp, offset, false)
}

// AppendFinal is Append for the entry a segment writes when it becomes
// inactive (roll): it may take the reserved last slot, so on an index
// that was opened appendable it cannot fail with ErrIndexFull (Kafka's
// maybeAppend with skipFullCheck). After a successful AppendFinal of the
// segment's max timestamp and the offset that first reached it, the last
// entry is exactly that pair, whether or not an entry was added: it is
// either the new entry or an earlier one that already held the maximum.
func (ix *TimeIndex) AppendFinal(timestamp int64, offset int64) error {
	return ix.append(timestamp, offset, true)
}

func (ix *TimeIndex) append(timestamp int64, offset int64, final bool) error {
	m := ix.m
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if err := m.usableLocked(); err != nil {
		return err
	}
	lastTS, lastRel := NoTimestamp, uint32(0)
	if last := m.lastSlotLocked(); last != nil {
		lastTS, lastRel = timeEntry(last, 0)
	}
	if timestamp <= lastTS {
		return nil
	}
	rel, ok := relative(m.baseOffset, offset)
	if !ok {
		return fmt.Errorf("%w: offset %d outside segment %d of %s", ErrInvalidEntry, offset, m.baseOffset, m.path)
	}
	if m.n.Load() > 0 && rel < lastRel {
		return fmt.Errorf("%w: offset %d below last entry's %d in %s",
			ErrInvalidEntry, offset, m.baseOffset+int64(lastRel), m.path)
	}
	if !final && !m.sealed && m.n.Load() >= m.capacity.Load()-1 {
		return fmt.Errorf("%w: %s holds %d entries (the last slot is kept for the final entry)", ErrIndexFull, m.path, m.n.Load())
	}
	var e [TimeEntrySize]byte
	be.PutUint64(e[:], uint64(timestamp))
	be.PutUint32(e[8:], rel)
	return m.appendLocked(e[:])
}

// Lookup returns the offset of the greatest entry whose timestamp is at or
// below timestamp, and true; or the segment's base offset and false when
// every entry is later (the scan starts at the segment's beginning).
func (ix *TimeIndex) Lookup(timestamp int64) (offset int64, ok bool) {
	m := ix.m
	b, n := m.readView()
	defer m.mapMu.RUnlock()
	i := timeFloor(b, n, timestamp)
	if i < 0 {
		return m.baseOffset, false
	}
	_, rel := timeEntry(b, i)
	return m.baseOffset + int64(rel), true
}

// timeFloor returns the greatest slot in [0, n) whose timestamp is at most
// t, or -1, searching the warm tail first (see warmBytes).
func timeFloor(b []byte, n int, t int64) int {
	lo, hi := 0, n
	if warm := n - warmBytes/TimeEntrySize; useWarmSection && warm > 0 {
		if ts, _ := timeEntry(b, warm); ts <= t {
			lo = warm
		} else {
			hi = warm
		}
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ts, _ := timeEntry(b, mid); ts <= t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// Entries returns the number of entries.
func (ix *TimeIndex) Entries() int { return int(ix.m.n.Load()) }

// LastEntry returns the last entry: the segment's largest indexed
// timestamp and its offset. With no entries it returns (NoTimestamp,
// BaseOffset, false).
func (ix *TimeIndex) LastEntry() (timestamp, offset int64, ok bool) {
	m := ix.m
	b, n := m.readView()
	defer m.mapMu.RUnlock()
	if n == 0 {
		return NoTimestamp, m.baseOffset, false
	}
	ts, rel := timeEntry(b, n-1)
	return ts, m.baseOffset + int64(rel), true
}

// IsFull reports whether an Append that raises the timestamp would return
// ErrIndexFull: every slot but the reserved last one is used. A sealed
// index, trimmed to its entries, is always full.
func (ix *TimeIndex) IsFull() bool { return ix.m.n.Load() >= ix.m.capacity.Load()-1 }

// TruncateTo removes every entry whose offset is at or above offset.
func (ix *TimeIndex) TruncateTo(offset int64) error {
	base := ix.m.baseOffset
	return ix.m.truncateEntries(func(b []byte, n int) int {
		if offset <= base {
			return 0
		}
		t := uint64(offset - base)
		if t > maxInt32 {
			return n
		}
		// First slot whose offset is >= t; offsets do not decrease.
		lo, hi := 0, n
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if _, rel := timeEntry(b, mid); uint64(rel) < t {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		return lo
	})
}

// Reset removes every entry.
func (ix *TimeIndex) Reset() error {
	return ix.m.truncateEntries(func([]byte, int) int { return 0 })
}

// Seal trims the file to its entries; see OffsetIndex.Seal.
func (ix *TimeIndex) Seal() error { return ix.m.seal() }

// Resize makes the index appendable again with capacity maxBytes; see
// OffsetIndex.Resize.
func (ix *TimeIndex) Resize(maxBytes int) error { return ix.m.resize(maxBytes) }

// Sync makes the entries durable.
func (ix *TimeIndex) Sync() error { return ix.m.sync() }

// Close unmaps, trims and closes the index; see OffsetIndex.Close.
func (ix *TimeIndex) Close() error { return ix.m.close() }

// SanityCheck verifies every entry: a file of whole entries, non-negative
// timestamps that do not decrease, relative offsets that fit in 31 bits and
// do not decrease. Any breach returns an error wrapping ErrCorruptIndex.
func (ix *TimeIndex) SanityCheck() error {
	m := ix.m
	m.wmu.Lock()
	defer m.wmu.Unlock()
	b, n, err := m.sanityLocked()
	if err != nil {
		return err
	}
	var prevTS int64
	var prevRel uint32
	for i := range n {
		ts, rel := timeEntry(b, i)
		switch {
		case ts < 0:
			return fmt.Errorf("%w: %s entry %d: negative timestamp %d", ErrCorruptIndex, m.path, i, ts)
		case rel > maxInt32:
			return fmt.Errorf("%w: %s entry %d: relative offset %d out of range", ErrCorruptIndex, m.path, i, rel)
		case i > 0 && ts < prevTS:
			return fmt.Errorf("%w: %s entry %d: timestamp %d below previous %d", ErrCorruptIndex, m.path, i, ts, prevTS)
		case i > 0 && rel < prevRel:
			return fmt.Errorf("%w: %s entry %d: offset %d below previous %d",
				ErrCorruptIndex, m.path, i, m.baseOffset+int64(rel), m.baseOffset+int64(prevRel))
		}
		prevTS, prevRel = ts, rel
	}
	return nil
}

// Path returns the index file's path.
func (ix *TimeIndex) Path() string { return ix.m.path }

// BaseOffset returns the segment's base offset.
func (ix *TimeIndex) BaseOffset() int64 { return ix.m.baseOffset }

// SizeBytes returns the bytes the entries use.
func (ix *TimeIndex) SizeBytes() int { return ix.Entries() * TimeEntrySize }
