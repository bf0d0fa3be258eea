package tiering

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/tiering/objstore"
)

func TestShareRate(t *testing.T) {
	const ms = time.Millisecond
	const us = time.Microsecond
	const mb = 1e6
	for _, c := range []struct {
		name string
		in   shareInput
		want float64
	}{
		{"no producer: no cap", shareInput{Fetched: 500 * mb, Quiet: 2 * ms, Min: 8 * mb}, 0},
		{"no quiet value yet: no cap", shareInput{Fetched: 500 * mb, Produce: 9 * ms, Min: 8 * mb}, 0},
		{"produce hurt while reading: half of what was fetched",
			shareInput{Fetched: 400 * mb, Produce: 5 * ms, Quiet: 2 * ms, Min: 8 * mb}, 200 * mb},
		{"hurt under a cap below the fetched rate: half the cap",
			shareInput{Rate: 100 * mb, Fetched: 120 * mb, Produce: 5 * ms, Quiet: 2 * ms, Min: 8 * mb}, 50 * mb},
		{"never below the floor",
			shareInput{Rate: 10 * mb, Fetched: 10 * mb, Produce: 5 * ms, Quiet: 2 * ms, Min: 8 * mb}, 8 * mb},
		{"slow produce but nothing fetched: not the reader's doing, the cap stays",
			shareInput{Rate: 40 * mb, Fetched: 0, Produce: 5 * ms, Quiet: 2 * ms, Min: 8 * mb}, 40 * mb},
		{"producers and no cap yet: the slow start's (4 floors)",
			shareInput{Fetched: 0, Produce: 5 * ms, Quiet: 2 * ms, Min: 8 * mb}, 32 * mb},
		// The absolute slack: around a 1 ms quiet value, a 1.3x tick is
		// noise (within 1 ms), not harm; the old ratio-only rule halved.
		{"no cap yet, readers fast and produce fine: what they fetched",
			shareInput{Fetched: 400 * mb, Produce: 1300 * us, Quiet: 1 * ms, Min: 8 * mb}, 400 * mb},
		{"noise around a 1 ms quiet value: the cap grows",
			shareInput{Rate: 80 * mb, Fetched: 80 * mb, Produce: 1400 * us, Quiet: 1 * ms, Min: 8 * mb}, 90 * mb},
		{"up to 1 ms above a 1 ms quiet value: the cap holds",
			shareInput{Rate: 80 * mb, Fetched: 80 * mb, Produce: 1900 * us, Quiet: 1 * ms, Min: 8 * mb}, 80 * mb},
		{"a real rise above a 1 ms quiet value halves",
			shareInput{Rate: 80 * mb, Fetched: 80 * mb, Produce: 2100 * us, Quiet: 1 * ms, Min: 8 * mb}, 40 * mb},
		// Above a few ms the ratio rules: 1.5x of 10 ms.
		{"1.4x of a 10 ms quiet value: held",
			shareInput{Rate: 80 * mb, Fetched: 80 * mb, Produce: 14 * ms, Quiet: 10 * ms, Min: 8 * mb}, 80 * mb},
		{"1.6x of a 10 ms quiet value: halved",
			shareInput{Rate: 80 * mb, Fetched: 80 * mb, Produce: 16 * ms, Quiet: 10 * ms, Min: 8 * mb}, 40 * mb},
		{"within 1.2x of a 10 ms quiet value: the cap grows by an eighth",
			shareInput{Rate: 80 * mb, Fetched: 80 * mb, Produce: 12 * ms, Quiet: 10 * ms, Min: 8 * mb}, 90 * mb},
		{"a small cap grows by at least the floor",
			shareInput{Rate: 16 * mb, Fetched: 16 * mb, Produce: 2 * ms, Quiet: 2 * ms, Min: 8 * mb}, 24 * mb},
		{"far above what is used: down to 8x it",
			shareInput{Rate: 400 * mb, Fetched: 20 * mb, Produce: 2 * ms, Quiet: 2 * ms, Min: 8 * mb}, 160 * mb},
		{"nothing fetched this tick: a small cap still grows",
			shareInput{Rate: 10 * mb, Fetched: 0, Produce: 2 * ms, Quiet: 2 * ms, Min: 8 * mb}, 18 * mb},
		{"an idle reader's cap falls back to the start (slow start again)",
			shareInput{Rate: 300 * mb, Fetched: 0, Produce: 2 * ms, Quiet: 2 * ms, Min: 8 * mb}, 32 * mb},
		{"an idle reader's cap held while produce is not fine",
			shareInput{Rate: 300 * mb, Fetched: 0, Produce: 2800 * us, Quiet: 2 * ms, Min: 8 * mb}, 300 * mb},
	} {
		if got := shareRate(c.in); got != c.want {
			t.Errorf("%s: shareRate(%+v) = %v, want %v", c.name, c.in, got, c.want)
		}
	}
}

// The closed loop on the pure parts: a node whose produce latency is a
// function of the remote rate (1 ms quiet, +1 ms per 100 MB/s, and ±30 %
// noise), readers able to fetch 400 MB/s. The share must cap them so
// produce stays within its bound, leave them most of what that bound
// allows (no sawtooth down to the floor), not oscillate once settled,
// and recover (lift the cap) when the harm goes.
func TestShareRateSettles(t *testing.T) {
	const mb = 1e6
	const floor = 2 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	noise := func(d float64) time.Duration { return time.Duration(d * (0.85 + 0.3*rng.Float64())) }
	var quiet time.Duration
	var rate float64
	step := func(harmPer100MB float64) (fetched float64, lat time.Duration) {
		fetched = 400 * mb
		if rate > 0 {
			fetched = min(fetched, rate)
		}
		lat = noise(float64(time.Millisecond) * (1 + harmPer100MB*fetched/(100*mb)))
		rate = shareRate(shareInput{Rate: rate, Fetched: fetched, Produce: lat, Quiet: quiet, Min: floor})
		quiet = shareRef(quiet, lat, fetched > 0, rate > 0 && rate <= floor)
		return fetched, lat
	}
	// Quiet ticks: the reference.
	for range 20 {
		lat := noise(float64(time.Millisecond))
		rate = shareRate(shareInput{Rate: rate, Produce: lat, Quiet: quiet, Min: floor})
		quiet = shareRef(quiet, lat, false, false)
	}
	// Harmful reads for 60 s: settle over the first 10, judge the rest.
	var hurt, halvings int
	var sum float64
	prev := rate
	for i := range 600 {
		fetched, lat := step(1)
		if i < 100 {
			prev = rate
			continue
		}
		_, bound := shareBounds(time.Millisecond)
		if lat > bound+bound/4 {
			hurt++
		}
		if rate > 0 && prev > 0 && rate < prev*0.6 {
			halvings++
		}
		prev = rate
		sum += fetched
	}
	mean := sum / 500
	// Produce within max(1.5 ms, 2 ms) needs fetched <= ~100 MB/s, less the noise.
	if mean < 30*mb || mean > 110*mb {
		t.Errorf("settled remote rate %.0f MB/s, want 30-110 (what 1 ms of slack allows)", mean/mb)
	}
	if hurt > 5 {
		t.Errorf("%d of 500 settled ticks had produce well above its bound", hurt)
	}
	if halvings > 25 {
		t.Errorf("the cap halved %d times in 50 settled seconds: it oscillates", halvings)
	}
	if quiet > 1200*time.Microsecond {
		t.Errorf("the quiet value ratcheted up to %v during the catch-up", quiet)
	}
	// Recovery: reads stop harming; within 10 s the cap no longer holds
	// the readers back.
	for range 100 {
		step(0)
		if rate >= 400*mb {
			return
		}
	}
	t.Errorf("the cap stayed at %.0f MB/s 10 s after the harm went", rate/mb)
}

func TestShareRef(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		name        string
		quiet, tick time.Duration
		fetching    bool
		atFloor     bool
		want        time.Duration
	}{
		{"the first tick with produce", 0, 3 * ms, false, false, 3 * ms},
		{"no produce: unchanged", 2 * ms, 0, true, false, 2 * ms},
		{"quiet tick, lower: an eighth of the way", 2 * ms, 1 * ms, false, false, 1875 * time.Microsecond},
		{"quiet tick, higher: an eighth of the way", 2 * ms, 10 * ms, false, false, 3 * ms},
		{"reading, lower: an eighth of the way", 2 * ms, 1 * ms, true, false, 1875 * time.Microsecond},
		{"reading, higher, above the floor: unchanged (no ratchet)", 2 * ms, 10 * ms, true, false, 2 * ms},
		{"reading at the floor, higher: drifts up 1 %", 2 * ms, 10 * ms, true, true, 2020 * time.Microsecond},
		{"reading at the floor, a little higher: the tick", 2 * ms, 2010 * time.Microsecond, true, true, 2010 * time.Microsecond},
	} {
		if got := shareRef(c.quiet, c.tick, c.fetching, c.atFloor); got != c.want {
			t.Errorf("%s: shareRef(%v, %v, %v, %v) = %v, want %v", c.name, c.quiet, c.tick, c.fetching, c.atFloor, got, c.want)
		}
	}
}

func TestShareQuantile(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 16 * time.Microsecond, 100 * time.Microsecond, time.Millisecond,
		1500 * time.Microsecond, 7 * time.Millisecond, time.Second, time.Hour} {
		i := shareBucket(d)
		if top := shareBucketTop(i); i < shareBuckets-1 && (d >= top || float64(top) > max(1.13*float64(d), float64(20*time.Microsecond))) {
			t.Errorf("%v: bucket %d's top %v, want just above it", d, i, top)
		}
		if i > 0 && d < shareBucketTop(i-1) {
			t.Errorf("%v: in bucket %d, below the previous bucket's top %v", d, i, shareBucketTop(i-1))
		}
	}
	var counts [shareBuckets]int64
	if got := shareQuantileOf(counts[:], 0.9); got != 0 {
		t.Errorf("empty histogram: %v, want 0", got)
	}
	// 18 requests at 1 ms, 2 at 20 ms: the p90 is 1 ms, the p99 20 ms.
	counts[shareBucket(time.Millisecond)] += 18
	counts[shareBucket(20*time.Millisecond)] += 2
	if got := shareQuantileOf(counts[:], 0.9); got < time.Millisecond || got > 1100*time.Microsecond {
		t.Errorf("p90 = %v, want about 1 ms", got)
	}
	if got := shareQuantileOf(counts[:], 0.99); got < 20*time.Millisecond || got > 22*time.Millisecond {
		t.Errorf("p99 = %v, want about 20 ms", got)
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

// The broker calls NoteProduce once per Produce request from every
// connection's goroutine: what that costs under contention.
func BenchmarkNoteProduce(b *testing.B) {
	r := rdReader(b, objstore.NewMemStore())
	b.RunParallel(func(pb *testing.PB) {
		d := 700 * time.Microsecond
		for pb.Next() {
			r.NoteProduce(d)
			d += 13 * time.Microsecond
			if d > 5*time.Millisecond {
				d = 700 * time.Microsecond
			}
		}
	})
}

// The share's bucket holds one tick of its rate, not a second: a cap of
// 40 MB/s lets one 4 MB GET go at once and the next wait for its debt,
// where a second's burst would let ten go before the cap bit.
func TestShareBucketBurstIsOneTick(t *testing.T) {
	now := time.Unix(0, 0)
	tb := newTokenBucket(1, func() time.Time { return now })
	tb.setRate(40e6, shareTick, true)
	if d := tb.takeIfPaid(4e6); d != 0 {
		t.Fatalf("first GET waits %v", d)
	}
	if d := tb.takeIfPaid(4e6); d != 0 {
		t.Fatalf("second GET waits %v, want 0: the 4 MB burst pays for it", d)
	}
	d := tb.takeIfPaid(4e6)
	if want := 100 * time.Millisecond; d != want {
		t.Fatalf("third GET waits %v, want %v (its 4 MB of debt at 40 MB/s)", d, want)
	}
	// A rate change keeps what was saved, up to the new burst.
	now = now.Add(time.Second)
	tb.setRate(10e6, shareTick, false)
	if tb.tokens != 1e6 {
		t.Fatalf("tokens %v after a second at 40 MB/s and a cut to 10 MB/s, want one tick's 1 MB", tb.tokens)
	}
}
