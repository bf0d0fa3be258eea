package tiering

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/tiering/objstore"
)

func (r *Reader) fetchesInFlight() int {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	return len(r.fetchFlights)
}

// A fetch waits for its remote read up to its wait and answers without
// the data while the read is in the air; a second fetch of the same
// partition and offset joins the read in flight instead of starting
// another; the read goes on past the wait and fills the cache, so the
// next fetch gets the data without another GET.
func TestReaderFetchCoalescesAndOutlivesItsWait(t *testing.T) {
	sr := newRdSlowRead(t, 300*time.Millisecond)
	mem, r, ctx, seg, off, want := sr.mem, sr.r, sr.ctx, sr.seg, sr.off, sr.want

	for i := range 2 {
		_, pending, err := r.Fetch(ctx, seg, off, 2000, time.Millisecond)
		if err != nil || !pending {
			t.Fatalf("fetch %d with a 1ms wait on a 300ms store: pending %v, err %v", i, pending, err)
		}
		if n := r.Stats().FetchReads; n != 1 {
			t.Fatalf("fetch %d: %d reads started, want 1 shared", i, n)
		}
	}
	if err := testutil.Within(15*time.Second, func() bool { return r.fetchesInFlight() == 0 }); err != nil {
		t.Fatal("the read in flight never finished")
	}
	gets := rdGetsOf(mem, seg.Key("p", ExtLog))
	if gets != 1 {
		t.Fatalf("%d GETs of the .log for two fetches, want 1", gets)
	}
	res, pending, err := r.Fetch(ctx, seg, off, 2000, 10*time.Second)
	if err != nil || pending {
		t.Fatalf("fetch after the read finished: pending %v, err %v", pending, err)
	}
	got, err := res.Bytes()
	res.Release()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("fetched bytes differ from the local log's (%v)", err)
	}
	if g := rdGetsOf(mem, seg.Key("p", ExtLog)); g != gets {
		t.Fatalf("%d GETs of the .log after a cached fetch, want %d", g, gets)
	}
}

// A fetch's read error is the fetch's; after Close fetches are refused.
func TestReaderFetchErrorsAndClose(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(2, 300<<10, 1000)
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	r := rdReader(t, mem)
	ctx := rdCtx(t, 30*time.Second)
	seg := segs[0]
	if _, _, err := r.Fetch(ctx, seg, seg.EndOffset+1, 2000, 10*time.Second); !errors.Is(err, ErrOffsetNotInSegment) {
		t.Fatalf("fetch above the segment: %v, want ErrOffsetNotInSegment", err)
	}
	r.Close()
	if _, _, err := r.Fetch(ctx, seg, seg.BaseOffset, 2000, 10*time.Second); !errors.Is(err, ErrReaderClosed) {
		t.Fatalf("fetch after Close: %v, want ErrReaderClosed", err)
	}
}
