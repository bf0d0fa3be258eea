package tiering

import (
	"context"
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// The fair share: remote reads yield to producers.
//
// A consumer catching up from the remote tier can take the whole node:
// GETs, cache writes, checksums and the fetch responses themselves all
// compete with the produce path for the same cores. The producers' target
// is a tail: their p99 during a catch-up within 1.5× of its quiet value.
// So the share steers by the tail, not by a mean that hides it:
//
//   - The broker reports every produce request's latency
//     ([Reader.NoteProduce]: one atomic add into a small fixed
//     histogram).
//   - The quiet tail: the p99 of a decaying histogram of the ticks in
//     which the reader has fetched nothing for a second (shareQuietTick,
//     shareQuietFold), so a catch-up
//     cannot ratchet its own yardstick up; the ticks in which the cap is
//     at its floor count too (the reader has yielded all it can, so what
//     is left is the node's load, and a lasting change of load becomes
//     the new quiet value).
//   - The bound: max(1.3× the quiet p99, it + 1 ms) (shareBounds: a
//     margin under the 1.5× target, for the requests just under the
//     bound; an absolute slack as well as a ratio, so noise around a
//     1 ms tail is no harm).
//   - The signal: the share of produce requests above the bound, a
//     moving average over about eight ticks (some hundreds of requests):
//     a p99 within the bound is at most 1 % of requests above it.
//
// Every shareTick shareRate sets a byte-rate cap on the reader's GETs,
// additive-increase / multiplicative-decrease as TCP does: more than
// shareCutFrac of requests above the bound while the reader fetches
// halves the cap (from what was fetched, if lower), at most once per
// shareCutGap ticks (the average needs that long to show the cut's
// effect), never below the floor (two chunks a second: every catch-up
// moves); less than shareGrowFrac grows it by an eighth (at least the
// floor) up to 8× what the reader fetches; in between it holds, so the
// cap settles rather than oscillates. With producers there is always a
// cap: it starts at shareStartFloors floors and an idle reader's cap
// falls back to that, so no catch-up begins at full speed before the
// share has seen what it does to the producers; the cap's bucket holds
// one tick of burst, not a second. Until its first cut a catch-up is in
// slow start, as a TCP connection is until its first loss: the cap
// doubles instead of growing by an eighth (still at most 8× what the
// reader fetches), so a harmless catch-up reaches 400 MB/s in 6 ticks
// instead of 21 (TestShareSlowStart): growing by eighths took some two
// seconds of a catch-up that lasts four. With no producer there is no
// cap. Pure: the shell (Reader.shareLoop) measures and applies.

// shareTick is how often the cap is decided.
const shareTick = 100 * time.Millisecond

// The bound: produce at most this far above its quiet p99 is fine.
const (
	shareHurtRatio = 1.3
	shareHurtSlack = time.Millisecond
)

// The policy's thresholds on the share of requests above the bound.
const (
	shareCutFrac  = 0.015 // above: halve (a p99 at the bound is 1 %)
	shareGrowFrac = 0.005 // below: grow; between: hold
	shareCutGap   = 5     // ticks between two cuts
	// shareIdleTicks ticks without a produce request mean no producers
	// (a slow producer's gaps between requests do not lift the cap).
	shareIdleTicks = 10
	// shareStartFloors is the cap a catch-up starts under, in floors.
	shareStartFloors = 4
)

// shareInput is what one decision sees.
type shareInput struct {
	Rate     float64 // the cap now, bytes/s; 0: none
	Fetched  float64 // bytes/s the reader's GETs fetched, a moving average
	Produce  bool    // producers are on the node (requests within shareIdleTicks)
	Slow     float64 // share of produce requests above the bound, a moving average
	Quiet    bool    // the quiet p99 is known (else Slow means nothing)
	SinceCut int     // ticks since the cap was last cut
	Min      float64 // the cap's floor, bytes/s
	// SlowStart: no cut since the reader last began (it was idle or
	// there were no producers): a cap that may grow doubles.
	SlowStart bool
}

// shareBounds returns the produce latency above which a request counts
// as hurt, for a quiet p99.
func shareBounds(quiet time.Duration) time.Duration {
	q := float64(quiet)
	return time.Duration(max(q*shareHurtRatio, q+float64(shareHurtSlack)))
}

// shareRate returns the cap for the next tick, 0 for none.
func shareRate(in shareInput) float64 {
	if !in.Produce {
		return 0
	}
	start := shareStartFloors * in.Min
	switch {
	case !in.Quiet:
		return max(in.Rate, start) // no yardstick yet: the slow start
	case in.Slow > shareCutFrac && in.Fetched > 0:
		if in.SinceCut < shareCutGap && in.Rate > 0 {
			return in.Rate // the last cut has not shown yet
		}
		base := in.Fetched
		if in.Rate > 0 {
			base = min(base, in.Rate)
		}
		return max(in.Min, base/2)
	case in.Rate <= 0:
		return max(start, in.Fetched)
	case in.Slow >= shareGrowFrac:
		return in.Rate // hold
	}
	// Fine: grow (double in slow start), but to no more than 8x what
	// readers use (at least the start): an idle reader's cap falls back
	// to the start, so the next catch-up starts slowly again.
	step := max(in.Rate/8, in.Min)
	if in.SlowStart {
		step = max(in.Rate, in.Min)
	}
	return min(in.Rate+step, max(8*in.Fetched, start))
}

// shareQuietDecay is how much of the quiet histogram each folded tick
// keeps: a memory of some 30 ticks, several hundred requests, enough for
// a p99.
const shareQuietDecay = 31.0 / 32

// shareQuietTick reports whether a tick's produce latencies are the
// node's quiet ones: the reader has fetched nothing for shareIdleTicks
// (a catch-up's GETs come a chunk at a time, and between them it still
// serves fetches from the chunk cache: one tick without a GET is not
// quiet), or the cap is at its floor (all the reader can yield).
func shareQuietTick(sinceFetch int, rate, floor float64) bool {
	return sinceFetch >= shareIdleTicks || rate > 0 && rate <= floor
}

// shareQuietFold folds a tick's counts into the quiet histogram.
func shareQuietFold(quiet []float64, tick []int64) {
	for i := range quiet {
		quiet[i] = quiet[i]*shareQuietDecay + float64(tick[i])
	}
}

// shareAbove returns how many of a tick's requests were above d (the
// buckets wholly above it).
func shareAbove(tick []int64, d time.Duration) int64 {
	var n int64
	for i, c := range tick {
		if i > 0 && shareBucketTop(i-1) >= d {
			n += c
		}
	}
	return n
}

// The produce histogram: shareSub buckets per power of two from
// 2^shareMinShift ns (16 µs) up; the last bucket takes everything above.
const (
	shareSubBits  = 3
	shareSub      = 1 << shareSubBits
	shareMinShift = 14
	shareOctaves  = 17 // 16 µs .. 2 s
	shareBuckets  = shareOctaves*shareSub + 1
)

// shareBucket returns the histogram bucket of a latency.
func shareBucket(d time.Duration) int {
	if d < 1<<shareMinShift {
		return 0
	}
	ns := uint64(d)
	e := bits.Len64(ns) - 1 // 2^e <= ns < 2^(e+1)
	i := (e-shareMinShift)*shareSub + int(ns>>(e-shareSubBits))&(shareSub-1)
	return min(i, shareBuckets-1)
}

// shareBucketTop returns the upper bound of bucket i (its latencies are
// below it); the last bucket's is its lower bound.
func shareBucketTop(i int) time.Duration {
	i = min(i+1, shareBuckets-1)
	e := i/shareSub + shareMinShift
	return time.Duration(uint64(shareSub+i%shareSub) << (e - shareSubBits))
}

// shareQuantileOf returns the q quantile of a histogram's counts (the
// upper bound of the bucket that holds it), 0 for an empty one.
func shareQuantileOf[T int64 | float64](counts []T, q float64) time.Duration {
	var n float64
	for _, c := range counts {
		n += float64(c)
	}
	if n <= 0 {
		return 0
	}
	rank := q * n
	var seen float64
	for i, c := range counts {
		if seen += float64(c); seen >= rank {
			return shareBucketTop(i)
		}
	}
	return shareBucketTop(len(counts) - 1)
}

// NoteProduce records one produce request's latency (the broker calls it
// for each): one atomic add. The first call starts the fair-share loop.
func (r *Reader) NoteProduce(d time.Duration) {
	r.produceHist[shareBucket(d)].Add(1)
	r.shareOnce.Do(func() { r.background(r.shareLoop) })
}

// shareLoop decides the cap every shareTick until Close.
func (r *Reader) shareLoop() {
	t := time.NewTicker(shareTick)
	defer t.Stop()
	var (
		rate, fetchedAvg, slow float64
		sinceCut, idle         int
		sinceFetch             = shareIdleTicks
		slowStart              = true
		counts                 [shareBuckets]int64
		quiet                  [shareBuckets]float64
	)
	last := time.Now()
	floor := float64(2 * r.chunkBytes)
	for {
		select {
		case <-r.ctx.Done():
			return
		case now := <-t.C:
			el := now.Sub(last).Seconds()
			last = now
			var n int64
			for i := range counts {
				counts[i] = r.produceHist[i].Swap(0)
				n += counts[i]
			}
			fetched := float64(r.fetchedBytes.Swap(0)) / max(el, 1e-3)
			if sinceFetch++; fetched > 0 {
				sinceFetch = 0
			}
			if fetchedAvg += (fetched - fetchedAvg) / 8; sinceFetch >= shareIdleTicks {
				fetchedAvg = 0 // the reader is idle
			}
			q99 := shareQuantileOf(quiet[:], 0.99)
			if n > 0 && q99 > 0 {
				slow += (float64(shareAbove(counts[:], shareBounds(q99)))/float64(n) - slow) / 8
			}
			if idle++; n > 0 {
				idle = 0
			}
			if sinceFetch >= shareIdleTicks || idle >= shareIdleTicks {
				slowStart = true // the next catch-up begins afresh
			}
			next := shareRate(shareInput{Rate: rate, Fetched: fetchedAvg, Produce: idle < shareIdleTicks, Slow: slow,
				Quiet: q99 > 0, SinceCut: sinceCut, Min: floor, SlowStart: slowStart})
			if next > 0 && next < rate*0.75 {
				sinceCut = 0 // a cut (not the ceiling following the reader down)
				if slow > shareCutFrac {
					slowStart = false // the producers felt it: grow by eighths now
				}
			} else {
				sinceCut++
			}
			if shareQuietTick(sinceFetch, rate, floor) {
				shareQuietFold(quiet[:], counts[:])
			}
			rate = next
			r.setShare(rate)
		}
	}
}

// shareWait waits until the cap (if any) lets a GET of n bytes go. The
// wait is re-checked at least every shareTick, so a cap lifted or raised
// takes effect at once for GETs already waiting, and the debt is at most
// one GET's bytes (no pile of reservations to pay off later).
func (r *Reader) shareWait(ctx context.Context, n int64) error {
	for r.shareOn.Load() {
		d := r.share.takeIfPaid(n)
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(min(d, shareTick))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return nil
}

// setShare applies a cap (0: none) to the reader's GETs.
func (r *Reader) setShare(rate float64) {
	was := r.shareOn.Load()
	r.shareBits.Store(math.Float64bits(rate))
	if rate <= 0 {
		r.shareOn.Store(false)
		return
	}
	r.share.setRate(rate, shareTick, !was)
	r.shareOn.Store(true)
}

// shareState is the fair share's part of a [Reader]: the produce
// latencies and fetched bytes of the current tick, and the cap.
type shareState struct {
	produceHist  [shareBuckets]atomic.Int64
	fetchedBytes atomic.Int64
	shareOn      atomic.Bool
	shareBits    atomic.Uint64 // the cap, float64 bits (0: none)
	share        *tokenBucket
}
