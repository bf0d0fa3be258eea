package tiering

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-io/strata/tiering/objstore"
)

// TestReaderMissingObjectFailsFastAndTheSame: a segment whose .log object
// is gone fails its first read promptly with ErrSegmentMissing (wrapping
// the store's not-found), is counted once and listed by Missing with its
// key, and every later read fails the same way without a GET; an intact
// segment of the partition still reads; put back, the segment reads again
// once a recheck is due.
func TestReaderMissingObjectFailsFastAndTheSame(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(3, 8<<10, 500)
	store := objstore.NewMemStore()
	segs := l.upload(store, "p")
	reg := prometheus.NewRegistry()
	r := rdReader(t, store, func(c *ReaderConfig) { c.Registerer = reg; c.ReadAheadChunks = -1 })
	hole := segs[1]
	key := hole.Key("p", ExtLog)
	rc, err := store.Get(rdCtx(t, 5*time.Second), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(rdCtx(t, time.Second), key); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		start := time.Now()
		_, err := r.Read(rdCtx(t, 10*time.Second), hole, hole.BaseOffset, 1<<20)
		if !errors.Is(err, ErrSegmentMissing) {
			t.Fatalf("read %d of a segment with no .log: %v, want ErrSegmentMissing", i, err)
		}
		if i == 0 && !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("first read: %v, want it to wrap the not-found", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("read %d took %v", i, d)
		}
	}
	gets := rdGetsOf(store, key)
	if _, err := r.Read(rdCtx(t, time.Second), hole, hole.BaseOffset, 1<<20); !errors.Is(err, ErrSegmentMissing) || rdGetsOf(store, key) != gets {
		t.Fatalf("a known-missing segment went to the store again (%v)", err)
	}
	var mv dto.Metric
	if err := r.m.missingSegments.Write(&mv); err != nil {
		t.Fatal(err)
	}
	if got := mv.GetCounter().GetValue(); got != 1 {
		t.Fatalf("%s = %v, want 1", MetricRemoteMissingSegments, got)
	}
	if m := r.Missing(hole.Partition); len(m) != 1 || m[0].Key != key || m[0].SegmentID != hole.SegmentID {
		t.Fatalf("Missing = %+v, want %s", m, key)
	}
	if _, err := r.Read(rdCtx(t, 5*time.Second), segs[0], segs[0].BaseOffset, 1<<20); err != nil {
		t.Fatalf("intact segment: %v", err)
	}

	// Put back: a recheck finds it.
	if _, err := store.Put(rdCtx(t, time.Second), key, bytes.NewReader(saved), int64(len(saved)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	r.missing.mu.Lock()
	r.missing.m[hole.SegmentID].checked = time.Now().Add(-missingRecheck)
	r.missing.mu.Unlock()
	if _, err := r.Read(rdCtx(t, 5*time.Second), hole, hole.BaseOffset, 1<<20); err != nil {
		t.Fatalf("segment put back: %v", err)
	}
	if m := r.Missing(hole.Partition); len(m) != 0 {
		t.Fatalf("still listed missing: %+v", m)
	}
}
