package index

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
)

// testFS is one file system the index tests run against.
type testFS struct {
	name string
	fs   vfs.FS
	dir  string
}

// forEachFS runs fn against the operating system's file system in a
// temporary directory and against the in-memory MemFS, as subtests.
func forEachFS(t *testing.T, fn func(t *testing.T, tf testFS)) {
	t.Helper()
	t.Run("fs=os", func(t *testing.T) {
		fn(t, testFS{name: "os", fs: vfs.Default, dir: t.TempDir()})
	})
	t.Run("fs=mem", func(t *testing.T) {
		m := vfs.NewMem()
		if err := m.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		fn(t, testFS{name: "mem", fs: m, dir: "/data"})
	})
}

func (tf testFS) path(name string) string { return filepath.Join(tf.dir, name) }

// fileSize returns the size of the named file.
func (tf testFS) fileSize(t *testing.T, name string) int64 {
	t.Helper()
	st, err := tf.fs.Stat(tf.path(name))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// writeRaw creates the named file holding b.
func (tf testFS) writeRaw(t *testing.T, name string, b []byte) {
	t.Helper()
	f, err := tf.fs.Create(tf.path(name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// rawOffsetEntries encodes offset index entries (relative offset, position).
func rawOffsetEntries(es ...[2]uint32) []byte {
	b := make([]byte, 0, len(es)*OffsetEntrySize)
	for _, e := range es {
		b = binary.BigEndian.AppendUint32(b, e[0])
		b = binary.BigEndian.AppendUint32(b, e[1])
	}
	return b
}

// rawTimeEntries encodes time index entries (timestamp, relative offset).
func rawTimeEntries(es ...[2]int64) []byte {
	b := make([]byte, 0, len(es)*TimeEntrySize)
	for _, e := range es {
		b = binary.BigEndian.AppendUint64(b, uint64(e[0]))
		b = binary.BigEndian.AppendUint32(b, uint32(e[1]))
	}
	return b
}

func openOffset(t *testing.T, tf testFS, name string, base int64, maxBytes int) *OffsetIndex {
	t.Helper()
	ix, err := OpenOffsetIndex(tf.fs, tf.path(name), base, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	return ix
}

func openTime(t *testing.T, tf testFS, name string, base int64, maxBytes int) *TimeIndex {
	t.Helper()
	ix, err := OpenTimeIndex(tf.fs, tf.path(name), base, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	return ix
}

// simBatch is one batch of a simulated log.
type simBatch struct {
	baseOffset, lastOffset int64
	position               int32
	size                   int32
	maxTimestamp           int64
}

// simLog is a simulated segment: random batch sizes, random offset counts
// per batch, random gaps between batches (as compaction leaves), and batch
// max timestamps that mostly rise but sometimes fall back (producers'
// clocks disagree), fed to the indexes the way the log does it.
type simLog struct {
	base    int64
	batches []simBatch
	// offsetEntries and timeEntries are what was appended to the indexes.
	offsetEntries [][2]int64 // offset, position
	timeEntries   [][2]int64 // timestamp, offset
}

// genLog builds a simulated log of n batches and appends index entries the
// way the log engineer's segment does: before writing a batch, if more than
// interval bytes were written since the last entry, index the batch (its
// last offset at its position); the time index gets (max timestamp so far,
// its offset) at the same moments whenever the maximum rose.
func genLog(rng *rand.Rand, base int64, n, interval int) *simLog {
	l := &simLog{base: base}
	next := base
	pos := int32(0)
	ts := int64(1_700_000_000_000) + rng.Int64N(1000)
	maxTS, maxTSOffset := int64(-1), base
	sinceLast := 0
	lastIndexedTS := int64(-1)
	for range n {
		b := simBatch{baseOffset: next, position: pos}
		b.lastOffset = next + rng.Int64N(50)
		b.size = int32(61 + rng.IntN(3*interval))
		switch rng.IntN(10) {
		case 0:
			ts -= rng.Int64N(500) // a producer with a slow clock
		default:
			ts += rng.Int64N(100)
		}
		b.maxTimestamp = ts
		if sinceLast > interval {
			l.offsetEntries = append(l.offsetEntries, [2]int64{b.lastOffset, int64(b.position)})
			sinceLast = 0
			if b.maxTimestamp > maxTS {
				maxTS, maxTSOffset = b.maxTimestamp, b.lastOffset
			}
			if maxTS > lastIndexedTS {
				l.timeEntries = append(l.timeEntries, [2]int64{maxTS, maxTSOffset})
				lastIndexedTS = maxTS
			}
		} else if b.maxTimestamp > maxTS {
			maxTS, maxTSOffset = b.maxTimestamp, b.lastOffset
		}
		sinceLast += int(b.size)
		l.batches = append(l.batches, b)
		pos += b.size
		next = b.lastOffset + 1
		if rng.IntN(8) == 0 {
			next += rng.Int64N(1000) // a compaction gap
		}
	}
	return l
}

func (l *simLog) end() int64 { return l.batches[len(l.batches)-1].lastOffset + 1 }

// bruteOffset is the reference Lookup: a linear scan for the greatest
// appended entry at or below target.
func (l *simLog) bruteOffset(target int64) (int64, int32) {
	off, pos := l.base, int32(0)
	for _, e := range l.offsetEntries {
		if e[0] <= target {
			off, pos = e[0], int32(e[1])
		}
	}
	return off, pos
}

// bruteTime is the reference TimeIndex.Lookup.
func (l *simLog) bruteTime(target int64) (int64, bool) {
	off, ok := l.base, false
	for _, e := range l.timeEntries {
		if e[0] <= target {
			off, ok = e[1], true
		}
	}
	return off, ok
}

// batchFor returns the batch holding offset (or the first after it, if
// offset falls in a gap), or -1 past the end.
func (l *simLog) batchFor(offset int64) int {
	for i, b := range l.batches {
		if b.lastOffset >= offset {
			return i
		}
	}
	return -1
}

func (l *simLog) feed(t *testing.T, oi *OffsetIndex, ti *TimeIndex) {
	t.Helper()
	for _, e := range l.offsetEntries {
		if err := oi.Append(e[0], int32(e[1])); err != nil {
			t.Fatalf("append offset entry %v: %v", e, err)
		}
	}
	for _, e := range l.timeEntries {
		if err := ti.Append(e[0], e[1]); err != nil {
			t.Fatalf("append time entry %v: %v", e, err)
		}
	}
}

// segName is a segment's file name stem: its base offset, 20 digits.
func segName(base int64) string { return fmt.Sprintf("%020d", base) }
