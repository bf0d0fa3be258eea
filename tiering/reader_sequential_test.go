package tiering

import (
	"bytes"
	"testing"
	"time"

	"github.com/strata-io/strata/tiering/objstore"
)

// A sequential reader needs no index: a read at a segment's first offset
// starts at its first batch, and a read at the offset where the last one
// ended starts where it ended; only a read elsewhere looks the index up.
// The bytes are the local log's.
func TestReaderSequentialReadsNeedNoIndex(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(2, 200<<10, 1000)
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = 64 << 10; c.ReadAheadChunks = -1 })
	ctx := rdCtx(t, 30*time.Second)
	for _, seg := range segs {
		for off := seg.BaseOffset; off <= seg.EndOffset; {
			want, wf, wn := l.localRead(off, 10<<10, seg)
			v, err := r.ReadView(ctx, seg, off, 10<<10)
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Bytes()
			v.Release()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || v.FirstOffset != wf || v.NextOffset != wn {
				t.Fatalf("read at %d: %d bytes [%d, %d), local %d bytes [%d, %d)", off, len(got), v.FirstOffset, v.NextOffset, len(want), wf, wn)
			}
			off = v.NextOffset
		}
	}
	for _, seg := range segs {
		if g := rdGetsOf(mem, seg.Key("p", ExtMeta)); g != 0 {
			t.Fatalf("%d GETs of %s's index by a sequential reader", g, seg.SegmentID)
		}
	}
	if st := r.Stats(); st.IndexMisses != 0 || st.IndexHits != 0 {
		t.Fatalf("index lookups by a sequential reader: %+v", st)
	}

	// Elsewhere in a segment: the index, and still the local log's bytes.
	seg := segs[1]
	off := (seg.BaseOffset + seg.EndOffset) / 2
	want, _, _ := l.localRead(off, 5000, seg)
	rr, err := r.Read(ctx, seg, off, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rr.Records, want) {
		t.Fatalf("read at %d: %d bytes, local %d", off, len(rr.Records), len(want))
	}
	if st := r.Stats(); st.IndexMisses != 1 {
		t.Fatalf("a read in the middle of a segment: %+v, want one index miss", st)
	}
}

// Segments smaller than a chunk: a read-ahead window of 4 chunks spans
// the 4 segments after the one being read, found by Follows for the first
// and by ReaderConfig.Next beyond it, and stops there.
func TestReaderReadAheadSpansSmallSegments(t *testing.T) {
	const chunk = 64 << 10
	l := rdNewLog(t)
	l.fillFixed(8, 20<<10, 1000)
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	next := func(seg RemoteSegment) (RemoteSegment, bool) {
		for i := range segs[:len(segs)-1] {
			if segs[i] == seg {
				return segs[i+1], true
			}
		}
		return RemoteSegment{}, false
	}
	r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = chunk; c.ReadAheadChunks = 4; c.Next = next })
	ctx := rdCtx(t, 30*time.Second)
	r.Follows(segs[0], segs[1])
	mem.ResetCalls()
	if _, err := r.Read(ctx, segs[0], segs[0].BaseOffset, 1000); err != nil {
		t.Fatal(err)
	}
	rdWaitReadAhead(t, r)
	for i, seg := range segs {
		want := 0
		if i <= 4 {
			want = 1
		}
		if g := rdGetsOf(mem, seg.Key("p", ExtLog)); g != want {
			t.Errorf("segment %d: %d GETs of its .log, want %d", i, g, want)
		}
		// Read-ahead enters each segment at its first batch: no index.
		if g := rdGetsOf(mem, seg.Key("p", ExtMeta)); g != 0 {
			t.Errorf("segment %d: %d GETs of its index object by read-ahead, want none", i, g)
		}
	}
	if st := r.Stats(); st.ReadAheadChunks != 4 {
		t.Fatalf("%d chunks read ahead, want 4: %+v", st.ReadAheadChunks, st)
	}
}

// Read-ahead holds at most a quarter of the cache's chunks (fetched and
// not read yet, or in the air) however many readers it serves: four
// sequential readers entering four segments, each asking for 2 chunks
// ahead of a 16-chunk cache, get 4 between them, not 8.
func TestReaderReadAheadBoundedNodeWide(t *testing.T) {
	const chunk = 64 << 10
	l := rdNewLog(t)
	l.fillFixed(4, 8*chunk, 1000)
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = chunk; c.CacheBytes = 16 * chunk; c.ReadAheadChunks = 2 })
	ctx := rdCtx(t, 30*time.Second)
	for _, seg := range segs {
		if _, err := r.Read(ctx, seg, seg.BaseOffset, 1000); err != nil {
			t.Fatal(err)
		}
	}
	rdWaitReadAhead(t, r)
	if st := r.Stats(); st.ReadAheadChunks != 4 {
		t.Fatalf("%d chunks read ahead for 4 readers of a 16-chunk cache, want 4: %+v", st.ReadAheadChunks, st)
	}
}

// rdWaitReadAhead waits until no read-ahead GET is in the air (they are
// counted when issued, before the read that issued them returns).
func rdWaitReadAhead(t *testing.T, r *Reader) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.raPending.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("read-ahead still in the air: %+v", r.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}
