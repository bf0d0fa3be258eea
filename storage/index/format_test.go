package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
)

// TestIndexFilesUseKafkaByteLayout: a closed index file holds exactly
// Kafka's big-endian entries and nothing else, so Kafka's tools (and a
// tiered-storage consumer expecting Kafka's files) read it as is.
func TestIndexFilesUseKafkaByteLayout(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		const base = 1 << 32
		oi := openOffset(t, tf, "k.index", base, 4096)
		ti := openTime(t, tf, "k.timeindex", base, 4096)
		if err := oi.Append(base+5, 100); err != nil {
			t.Fatal(err)
		}
		if err := oi.Append(base+70000, 1<<30); err != nil {
			t.Fatal(err)
		}
		if err := ti.Append(1_700_000_000_123, base+5); err != nil {
			t.Fatal(err)
		}
		if err := oi.Close(); err != nil {
			t.Fatal(err)
		}
		if err := ti.Close(); err != nil {
			t.Fatal(err)
		}
		want := []byte{0, 0, 0, 5, 0, 0, 0, 100, 0, 1, 0x11, 0x70, 0x40, 0, 0, 0}
		if got := readAll(t, tf, "k.index"); !bytes.Equal(got, want) {
			t.Fatalf(".index bytes %x, want %x", got, want)
		}
		wantT := binary.BigEndian.AppendUint64(nil, 1_700_000_000_123)
		wantT = binary.BigEndian.AppendUint32(wantT, 5)
		if got := readAll(t, tf, "k.timeindex"); !bytes.Equal(got, wantT) {
			t.Fatalf(".timeindex bytes %x, want %x", got, wantT)
		}
	})
}

func readAll(t *testing.T, tf testFS, name string) []byte {
	t.Helper()
	f, err := tf.fs.Open(tf.path(name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzOpenOffsetIndex: for any file contents and capacity,
//   - opening, SanityCheck, Lookup, LastEntry, Append, TruncateTo and Close
//     never panic;
//   - when SanityCheck passes, Lookup agrees with a linear scan of the
//     entries decoded from the file, and Append of an entry above the last
//     either succeeds or reports ErrIndexFull.
func FuzzOpenOffsetIndex(f *testing.F) {
	f.Add(rawOffsetEntries([2]uint32{1, 10}, [2]uint32{5, 20}), uint16(64), int64(3))
	f.Add(rawOffsetEntries([2]uint32{9, 10}, [2]uint32{5, 20}), uint16(0), int64(7))
	f.Add(append(rawOffsetEntries([2]uint32{0, 0}, [2]uint32{2, 2}), make([]byte, 40)...), uint16(8), int64(1))
	f.Add([]byte{1, 2, 3}, uint16(16), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, maxBytes uint16, seed int64) {
		mem := vfs.NewMem()
		w, err := mem.Create("/a.index")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		_ = w.Close()
		const base = 1000
		ix, err := OpenOffsetIndex(mem, "/a.index", base, int(maxBytes))
		if err != nil {
			t.Fatal(err)
		}
		defer ix.Close()
		rng := rand.New(rand.NewPCG(uint64(seed), 0))
		sane := ix.SanityCheck() == nil
		if sane && len(data)%OffsetEntrySize != 0 {
			t.Fatal("SanityCheck passed a torn file")
		}
		n := ix.Entries()
		if n*OffsetEntrySize > len(data) {
			t.Fatalf("%d entries counted in %d bytes", n, len(data))
		}
		for range 20 {
			target := base - 5 + rng.Int64N(1<<33)
			if rng.IntN(2) == 0 {
				target = base - 5 + rng.Int64N(100)
			}
			off, pos := ix.Lookup(target)
			if !sane {
				continue
			}
			wantOff, wantPos := int64(base), int32(0)
			for i := range n {
				e := data[i*OffsetEntrySize:]
				if o := base + int64(binary.BigEndian.Uint32(e)); o <= target {
					wantOff, wantPos = o, int32(binary.BigEndian.Uint32(e[4:]))
				}
			}
			if off != wantOff || pos != wantPos {
				t.Fatalf("Lookup(%d) = (%d, %d), scan (%d, %d)", target, off, pos, wantOff, wantPos)
			}
		}
		last, lastPos, ok := ix.LastEntry()
		if !ok {
			last, lastPos = base-1, 0
		}
		err = ix.Append(last+1, max(lastPos, 0))
		if sane && last+1-base <= maxInt32 && err != nil && !errors.Is(err, ErrIndexFull) {
			t.Fatalf("Append after the last entry of a sane index: %v", err)
		}
		if err := ix.TruncateTo(base + rng.Int64N(200)); err != nil {
			t.Fatal(err)
		}
	})
}
