package tiering

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/tiering/objstore"
)

func TestShareRate(t *testing.T) {
	const ms = time.Millisecond
	const mb = 1e6
	for _, c := range []struct {
		name string
		in   shareInput
		want float64
	}{
		{"no producer: no cap", shareInput{Fetched: 500 * mb, Best: 2 * ms, Min: 8 * mb}, 0},
		{"no best yet: no cap", shareInput{Fetched: 500 * mb, Produce: 9 * ms, Min: 8 * mb}, 0},
		{"produce slowed while reading: half of what was fetched",
			shareInput{Fetched: 400 * mb, Produce: 5 * ms, Best: 2 * ms, Min: 8 * mb}, 200 * mb},
		{"slowed under a cap below the fetched rate: half the cap",
			shareInput{Rate: 100 * mb, Fetched: 120 * mb, Produce: 5 * ms, Best: 2 * ms, Min: 8 * mb}, 50 * mb},
		{"never below the floor",
			shareInput{Rate: 10 * mb, Fetched: 10 * mb, Produce: 5 * ms, Best: 2 * ms, Min: 8 * mb}, 8 * mb},
		{"slow produce but nothing fetched: not the reader's doing",
			shareInput{Rate: 0, Fetched: 0, Produce: 5 * ms, Best: 2 * ms, Min: 8 * mb}, 0},
		{"within 1.25x of the best: the cap grows",
			shareInput{Rate: 40 * mb, Fetched: 40 * mb, Produce: 2400 * time.Microsecond, Best: 2 * ms, Min: 8 * mb}, 58 * mb},
		{"far above what is used: lifted",
			shareInput{Rate: 400 * mb, Fetched: 20 * mb, Produce: 2 * ms, Best: 2 * ms, Min: 8 * mb}, 0},
		{"nothing fetched this tick: the cap still grows, not lifted",
			shareInput{Rate: 10 * mb, Fetched: 0, Produce: 2 * ms, Best: 2 * ms, Min: 8 * mb}, 20.5 * mb},
		{"no cap and produce fine: none",
			shareInput{Fetched: 400 * mb, Produce: 2 * ms, Best: 2 * ms, Min: 8 * mb}, 0},
	} {
		if got := shareRate(c.in); got != c.want {
			t.Errorf("%s: shareRate(%+v) = %v, want %v", c.name, c.in, got, c.want)
		}
	}
}

func TestBestProduce(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		best, tick, want time.Duration
	}{
		{0, 3 * ms, 3 * ms},        // the first tick with produce
		{2 * ms, 0, 2 * ms},        // no produce: unchanged
		{2 * ms, 1 * ms, 1 * ms},   // better: taken
		{2 * ms, 5 * ms, 2020_000}, // worse: the best drifts up 1 %
	} {
		if got := bestProduce(c.best, c.tick); got != c.want {
			t.Errorf("bestProduce(%v, %v) = %v, want %v", c.best, c.tick, got, c.want)
		}
	}
}

// The shell: produce latencies well above the best while a reader
// fetches put a cap on the reader's GETs (and the reader still makes
// progress under it); once produce stops, the cap goes.
func TestReaderFairShareCapsReadsWhileProduceSuffers(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(2, 2<<20, 16<<10)
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes, c.CacheBytes = 64<<10, 1<<20 })
	ctx := rdCtx(t, 60*time.Second)
	stop := make(chan struct{})
	done := make(chan error, 1)
	var reads atomic.Int64
	go func() { // a catch-up reader going round the log: GETs every tick
		for {
			for _, seg := range segs {
				for off := seg.BaseOffset; off <= seg.EndOffset; {
					select {
					case <-stop:
						done <- nil
						return
					default:
					}
					v, err := r.ReadView(ctx, seg, off, 64<<10)
					if err != nil {
						done <- err
						return
					}
					off = v.NextOffset
					v.Release()
					reads.Add(1)
				}
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}()
	produce := func(d time.Duration, until func() bool) error {
		return testutil.Within(10*time.Second, func() bool {
			for range 10 {
				r.NoteProduce(d)
			}
			time.Sleep(5 * time.Millisecond)
			return until()
		})
	}
	// A quiet phase sets the best, then produce suffers.
	for range 5 {
		r.NoteProduce(200 * time.Microsecond)
		time.Sleep(shareTick)
	}
	if err := produce(20*time.Millisecond, func() bool { return r.Stats().ShareRate > 0 }); err != nil {
		t.Fatal("slow produce beside a catch-up never capped its reads")
	}
	capped := r.Stats().ShareRate
	before := reads.Load()
	if err := testutil.Within(10*time.Second, func() bool { return reads.Load() > before+10 }); err != nil {
		t.Fatalf("the reader stalled under a cap of %.0f B/s", capped)
	}
	// No produce: no cap.
	if err := testutil.Within(10*time.Second, func() bool { return r.Stats().ShareRate == 0 }); err != nil {
		t.Fatalf("the cap stayed at %.0f B/s with no producer", r.Stats().ShareRate)
	}
}
