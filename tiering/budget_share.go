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
// compete with the produce path for the same cores. The broker reports
// every produce request's latency ([Reader.NoteProduce]) into a small
// fixed histogram; every shareTick the reader takes the tick's high
// quantile (shareQuantile: a tail, as the producers' target is, not a
// mean that hides it) and compares it with the node's quiet value
// (shareRef: learned from ticks in which the reader fetched nothing, so
// a catch-up cannot ratchet its own yardstick up) and sets a byte-rate
// cap on its GETs (shareRate, additive-increase /
// multiplicative-decrease as TCP does). The comparison has an absolute
// slack as well as a ratio, and a band between growing and backing off
// in which the cap holds, so noise around a 1 ms quiet value does not
// halve the cap and the cap settles instead of oscillating:
//
//   - hurt (above max(1.5× the quiet value, it + 1 ms)) while remote
//     bytes were fetched: the cap becomes half of what was fetched (or of
//     the cap, if lower), never below the floor;
//   - fine (at most max(1.2× the quiet value, it + 0.5 ms)): the cap
//     grows by an eighth (at least the floor), up to 8× what readers
//     fetched (at least the start);
//   - in between, or hurt with nothing fetched (not the reader's doing):
//     the cap stays.
//
// With producers there is always a cap: it starts at shareStartFloors
// floors (slow start) and an idle reader's cap falls back to that, so no
// catch-up begins at full speed before the share has seen what it does
// to the producers; the cap's bucket holds one tick of burst, not a
// second. With no producer there is no cap. The floor (two chunks a
// second) keeps every catch-up moving. Pure: the shell (Reader.shareLoop)
// measures and applies.

// shareTick is how often the cap is decided.
const shareTick = 100 * time.Millisecond

// shareQuantile is the quantile of a tick's produce latencies the share
// steers by: with a producer's requests every few milliseconds a tick
// holds some tens of them, of which the p90 is a tail that one stray
// request does not move.
const shareQuantile = 0.9

// The slack: produce at most this far above its quiet value is fine.
const (
	shareHurtRatio = 1.5
	shareHurtSlack = time.Millisecond
	shareFineRatio = 1.2
	shareFineSlack = 500 * time.Microsecond
)

// shareInput is what one decision sees.
type shareInput struct {
	Rate    float64       // the cap now, bytes/s; 0: none
	Fetched float64       // bytes/s the reader's GETs fetched over the last tick
	Produce time.Duration // the tick's produce latency quantile; 0: no produce
	Quiet   time.Duration // the quiet value before this tick (shareRef); 0: none yet
	Min     float64       // the cap's floor, bytes/s
}

// shareBounds returns the latencies at or below which produce is fine
// and above which it is hurt, for a quiet value.
func shareBounds(quiet time.Duration) (fine, hurt time.Duration) {
	q := float64(quiet)
	fine = time.Duration(max(q*shareFineRatio, q+float64(shareFineSlack)))
	hurt = time.Duration(max(q*shareHurtRatio, q+float64(shareHurtSlack)))
	return fine, hurt
}

// shareStartFloors is the cap a catch-up starts under, in floors: with
// producers on the node there is always a cap (slow start, as TCP's), so
// the first tick of a catch-up cannot take the node before the share has
// seen what it does to them.
const shareStartFloors = 4

// shareRate returns the cap for the next tick, 0 for none.
func shareRate(in shareInput) float64 {
	if in.Produce <= 0 || in.Quiet <= 0 {
		return 0
	}
	start := shareStartFloors * in.Min
	fine, hurt := shareBounds(in.Quiet)
	switch {
	case in.Produce > hurt && in.Fetched > 0:
		base := in.Fetched
		if in.Rate > 0 {
			base = min(base, in.Rate)
		}
		return max(in.Min, base/2)
	case in.Rate <= 0:
		return max(start, in.Fetched)
	case in.Produce > fine:
		return in.Rate // hold
	}
	// Fine: grow, but to no more than 8x what readers use (at least the
	// start): an idle reader's cap falls back to the start, so the next
	// catch-up starts slowly again.
	return min(in.Rate+max(in.Rate/8, in.Min), max(8*in.Fetched, start))
}

// shareRef folds a tick's produce latency into the quiet value. A tick
// in which the reader fetched nothing moves it an eighth of the way to
// the tick's (a moving average of the quiet ticks, either way). A tick
// with remote reads may lower it that way, but raise it only while the
// cap is at its floor (1 % a tick): the reader has then yielded all it
// can and produce is still slow, so the load changed (more producers)
// and that becomes, slowly, the new quiet value; above the floor the
// catch-up's own harm must not ratchet its yardstick up. A tick without
// produce leaves it.
func shareRef(quiet, tick time.Duration, fetching, atFloor bool) time.Duration {
	switch {
	case tick <= 0:
		return quiet
	case quiet <= 0:
		return tick
	case !fetching || tick < quiet:
		return quiet + (tick-quiet)/8
	case atFloor:
		return min(tick, time.Duration(math.Ceil(float64(quiet)*1.01)))
	}
	return quiet
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
func shareQuantileOf(counts []int64, q float64) time.Duration {
	var n int64
	for _, c := range counts {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i, c := range counts {
		if seen += c; seen >= rank {
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
	var quiet time.Duration
	var rate float64
	var counts [shareBuckets]int64
	last := time.Now()
	floor := float64(2 * r.chunkBytes)
	for {
		select {
		case <-r.ctx.Done():
			return
		case now := <-t.C:
			el := now.Sub(last).Seconds()
			last = now
			for i := range counts {
				counts[i] = r.produceHist[i].Swap(0)
			}
			tick := shareQuantileOf(counts[:], shareQuantile)
			fetched := float64(r.fetchedBytes.Swap(0)) / max(el, 1e-3)
			rate = shareRate(shareInput{Rate: rate, Fetched: fetched, Produce: tick, Quiet: quiet, Min: floor})
			quiet = shareRef(quiet, tick, fetched > 0, rate > 0 && rate <= floor)
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
