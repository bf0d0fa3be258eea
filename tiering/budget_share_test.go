package tiering

import (
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/tiering/objstore"
)

func TestShareRate(t *testing.T) {
	const mb = 1e6
	in := func(rate, fetched, slow float64, sinceCut int) shareInput {
		return shareInput{Rate: rate * mb, Fetched: fetched * mb, Produce: true, Slow: slow, Quiet: true, SinceCut: sinceCut, Min: 8 * mb}
	}
	for _, c := range []struct {
		name string
		in   shareInput
		want float64
	}{
		{"no producer: no cap", shareInput{Fetched: 500 * mb, Slow: 0.5, Quiet: true, Min: 8 * mb}, 0},
		{"producers, no quiet tail yet: the slow start (4 floors)",
			shareInput{Fetched: 500 * mb, Produce: true, Slow: 0.5, Min: 8 * mb}, 32 * mb},
		{"producers, no quiet tail yet, a cap: kept", shareInput{Rate: 90 * mb, Produce: true, Min: 8 * mb}, 90 * mb},
		{"producers and no cap: the slow start", in(0, 0, 0, 10), 32 * mb},
		{"producers, no cap, readers fast and produce fine: what they fetch", in(0, 400, 0, 10), 400 * mb},
		{"3 % above the bound while reading: half of what was fetched", in(0, 400, 0.03, 10), 200 * mb},
		{"3 % above the bound under a cap below the fetched rate: half the cap", in(100, 120, 0.03, 10), 50 * mb},
		{"never below the floor", in(10, 10, 0.03, 10), 8 * mb},
		{"a cut 2 ticks ago has not shown yet: held", in(50, 50, 0.03, 2), 50 * mb},
		{"slow produce but nothing fetched: not the reader's doing, held", in(40, 0, 0.03, 10), 40 * mb},
		// Noise: a quiet tail learned with the noise in it leaves few
		// requests above 1.5x of it; under 1.5 % is no harm.
		{"1 % above the bound: held, not halved", in(80, 80, 0.01, 10), 80 * mb},
		{"0.2 % above the bound: the cap grows by an eighth", in(80, 80, 0.002, 10), 90 * mb},
		{"a small cap grows by at least the floor", in(16, 16, 0, 10), 24 * mb},
		{"far above what is used: down to 8x it", in(400, 20, 0, 10), 160 * mb},
		{"an idle reader's cap falls back to the start", in(300, 0, 0, 10), 32 * mb},
		{"an idle reader's cap held while produce is not fine", in(300, 0, 0.01, 10), 300 * mb},
		{"slow start, produce fine: the cap doubles", slowStart(in(80, 80, 0.002, 10)), 160 * mb},
		{"slow start: a small cap grows by at least the floor", slowStart(in(4, 4, 0, 10)), 12 * mb},
		{"slow start: still at most 8x what is fetched", slowStart(in(80, 12, 0, 10)), 96 * mb},
		{"slow start, produce in the hold band: held", slowStart(in(80, 80, 0.01, 10)), 80 * mb},
		{"slow start, 3 % above the bound: halved as ever", slowStart(in(80, 80, 0.03, 10)), 40 * mb},
	} {
		if got := shareRate(c.in); got != c.want {
			t.Errorf("%s: shareRate(%+v) = %v, want %v", c.name, c.in, got, c.want)
		}
	}
}

func slowStart(in shareInput) shareInput {
	in.SlowStart = true
	return in
}

// simShare is a closed loop on the pure parts, the shell's arithmetic
// without its clock: a node whose produce requests (20 a tick) take
// base ± 30 %, of which 2 % spike to 10x (the quiet tail), and which a
// remote read slows by harm ms per 100 MB/s and makes spike more often.
type simShare struct {
	rng                    *rand.Rand
	rate, fetchedAvg, slow float64
	sinceCut               int
	sinceFetch             int
	pastSlow               bool // the slow start is over: a cut came
	noSlowStart            bool // growth by eighths only (the rule before slow start)
	debt                   float64
	quiet                  [shareBuckets]float64
	floor                  float64
	quietRule              func(sinceFetch int, rate, floor float64) bool
}

func (s *simShare) tick(want float64, base time.Duration, harm float64) (fetched float64, lat []time.Duration) {
	rate := want
	if s.rate > 0 {
		rate = min(want, s.rate)
	}
	// GETs come a 4 MiB chunk at a time: a tick fetches whole chunks (on
	// average the rate), and a slow reader's ticks are mostly empty; its
	// harm (serving what it fetched) is spread over every tick.
	const chunk = 4 << 20
	s.debt += rate / 10
	for s.debt >= chunk {
		s.debt -= chunk
		fetched += chunk * 10
	}
	if s.sinceFetch++; fetched > 0 {
		s.sinceFetch = 0
	}
	var counts [shareBuckets]int64
	for range 20 {
		d := float64(base) * (0.7 + 0.6*s.rng.Float64())
		d += harm * rate / 100e6 * float64(time.Millisecond)
		if s.rng.Float64() < 0.02+0.05*harm*rate/400e6 {
			d *= 10
		}
		lat = append(lat, time.Duration(d))
		counts[shareBucket(time.Duration(d))]++
	}
	if s.fetchedAvg += (fetched - s.fetchedAvg) / 8; s.sinceFetch >= shareIdleTicks {
		s.fetchedAvg = 0
	}
	q99 := shareQuantileOf(s.quiet[:], 0.99)
	if q99 > 0 {
		s.slow += (float64(shareAbove(counts[:], shareBounds(q99)))/20 - s.slow) / 8
	}
	if s.sinceFetch >= shareIdleTicks {
		s.pastSlow = false
	}
	next := shareRate(shareInput{Rate: s.rate, Fetched: s.fetchedAvg, Produce: true, Slow: s.slow, Quiet: q99 > 0,
		SinceCut: s.sinceCut, Min: s.floor, SlowStart: !s.pastSlow && !s.noSlowStart})
	if next > 0 && next < s.rate*0.75 {
		s.sinceCut = 0
		if s.slow > shareCutFrac {
			s.pastSlow = true
		}
	} else {
		s.sinceCut++
	}
	if s.quietRule(s.sinceFetch, s.rate, s.floor) {
		shareQuietFold(s.quiet[:], counts[:])
	}
	s.rate = next
	return fetched, lat
}

func p99(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[(len(ds)*99+99)/100-1]
}

// The share must cap a harmful catch-up so the producers' p99 stays
// within 1.5x of its quiet value, leave the reader a fair rate (no
// sawtooth down to the floor), not oscillate once settled, recover
// (stop holding the reader back) when the harm goes, and never cut a
// reader that does no harm.
func TestShareRateSettles(t *testing.T) {
	const mb = 1e6
	s := &simShare{rng: rand.New(rand.NewPCG(1, 2)), floor: 2 << 20, sinceFetch: shareIdleTicks, quietRule: shareQuietTick}
	var quiet []time.Duration
	for range 100 {
		_, lat := s.tick(0, time.Millisecond, 0)
		quiet = append(quiet, lat...)
	}
	// Harmful reads for 60 s: settle over the first 10, judge the rest.
	var during []time.Duration
	var cuts int
	var sum float64
	for i := range 600 {
		prev := s.rate
		fetched, lat := s.tick(400*mb, time.Millisecond, 1)
		if i < 100 {
			continue
		}
		during = append(during, lat...)
		if s.rate < prev*0.6 {
			cuts++
		}
		sum += fetched
	}
	mean := sum / 500
	if q := shareQuantileOf(s.quiet[:], 0.99); q > 11*time.Millisecond {
		t.Errorf("the quiet p99 rose to %v during the catch-up: it took the reader's harm for the node's quiet", q)
	}
	if inc := float64(p99(during)) / float64(p99(quiet)); inc > 1.5 {
		t.Errorf("producer p99 %v during against %v quiet: ×%.2f, want at most 1.5", p99(during), p99(quiet), inc)
	}
	if mean < 20*mb {
		t.Errorf("settled remote rate %.0f MB/s: starved", mean/mb)
	}
	if cuts > 50 {
		t.Errorf("the cap was cut %d times in 50 settled seconds: it oscillates", cuts)
	}
	// Recovery: reads stop harming; within 10 s the cap no longer holds
	// the readers back.
	recovered := false
	for range 100 {
		s.tick(400*mb, time.Millisecond, 0)
		if s.rate >= 400*mb {
			recovered = true
			break
		}
	}
	if !recovered {
		t.Errorf("the cap stayed at %.0f MB/s 10 s after the harm went", s.rate/mb)
	}
	// Harmless reads are never cut.
	for range 300 {
		prev := s.rate
		s.tick(400*mb, time.Millisecond, 0)
		if s.rate < prev*0.75 {
			t.Fatalf("a harmless reader's cap cut from %.0f to %.0f MB/s", prev/mb, s.rate/mb)
		}
	}
	t.Logf("settled at %.0f MB/s, %d cuts, p99 %v quiet, %v during", mean/mb, cuts, p99(quiet), p99(during))
}

// A harmless catch-up (the producers do not feel it) reaches the rate it
// asks for in slow start in well under half the ticks that growth by
// eighths takes; a harmful one still settles (TestShareRateSettles runs
// with slow start).
func TestShareSlowStart(t *testing.T) {
	const mb = 1e6
	ticksTo := func(noSlowStart bool) int {
		s := &simShare{rng: rand.New(rand.NewPCG(3, 4)), floor: 8 << 20, sinceFetch: shareIdleTicks,
			quietRule: shareQuietTick, noSlowStart: noSlowStart}
		for range 100 {
			s.tick(0, time.Millisecond, 0)
		}
		for i := range 300 {
			if s.tick(400*mb, time.Millisecond, 0); s.rate >= 400*mb {
				return i + 1
			}
		}
		t.Fatalf("noSlowStart=%v: the cap is %.0f MB/s after 30 s of a harmless catch-up", noSlowStart, s.rate/mb)
		return 0
	}
	slow, eighths := ticksTo(false), ticksTo(true)
	if slow*2 > eighths {
		t.Errorf("a harmless catch-up reached 400 MB/s in %d ticks in slow start, %d by eighths: want under half", slow, eighths)
	}
	t.Logf("400 MB/s reached in %d ticks (slow start), %d (eighths)", slow, eighths)
}

func TestShareQuietTick(t *testing.T) {
	const floor = 8e6
	for _, c := range []struct {
		sinceFetch  int
		rate        float64
		quiet       bool
		description string
	}{
		{shareIdleTicks, 0, true, "no GET for a second"},
		{1, 0, false, "a tick between two GETs of a catch-up"},
		{shareIdleTicks - 1, 40e6, false, "still reading"},
		{0, floor, true, "at the floor: all the reader can yield"},
	} {
		if got := shareQuietTick(c.sinceFetch, c.rate, floor); got != c.quiet {
			t.Errorf("%s: shareQuietTick(%d, %v) = %v, want %v", c.description, c.sinceFetch, c.rate, got, c.quiet)
		}
	}
}

func TestShareQuietTail(t *testing.T) {
	var tick [shareBuckets]int64
	tick[shareBucket(time.Millisecond)] = 98
	tick[shareBucket(10*time.Millisecond)] = 2
	if n := shareAbove(tick[:], 5*time.Millisecond); n != 2 {
		t.Errorf("above 5 ms: %d, want 2", n)
	}
	if n := shareAbove(tick[:], 20*time.Millisecond); n != 0 {
		t.Errorf("above 20 ms: %d, want 0", n)
	}
	if n := shareAbove(tick[:], 0); n != 100 {
		t.Errorf("above 0: %d, want 100", n)
	}
	var quiet [shareBuckets]float64
	shareQuietFold(quiet[:], tick[:])
	if q := shareQuantileOf(quiet[:], 0.99); q < 10*time.Millisecond || q > 11*time.Millisecond {
		t.Errorf("quiet p99 %v, want about 10 ms", q)
	}
	// Later ticks without spikes: the old ones decay, the p99 falls.
	var calm [shareBuckets]int64
	calm[shareBucket(time.Millisecond)] = 100
	for range 40 {
		shareQuietFold(quiet[:], calm[:])
	}
	if q := shareQuantileOf(quiet[:], 0.99); q > 1100*time.Microsecond {
		t.Errorf("quiet p99 %v after 40 calm ticks, want about 1 ms", q)
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
	// A gap between produce requests shorter than shareIdleTicks is a
	// slow producer, not none: the cap stays through it.
	for end := time.Now().Add(4 * shareTick); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if r.Stats().ShareRate == 0 {
			t.Fatal("the cap was lifted in a 400 ms gap between produce requests")
		}
	}
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
