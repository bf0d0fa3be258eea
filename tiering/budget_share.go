package tiering

import (
	"context"
	"math"
	"sync/atomic"
	"time"
)

// The fair share: remote reads yield to producers.
//
// A consumer catching up from the remote tier can take the whole node:
// GETs, cache writes, checksums and the fetch responses themselves all
// compete with the produce path for the same cores. The broker reports
// every produce request's latency ([Reader.NoteProduce]); every
// shareTick the reader compares the tick's mean with the best the node
// has recently done (bestProduce: the lowest tick mean, drifting up 1 %
// a tick so a lasting change of load becomes the new best) and sets a
// byte-rate cap on its GETs (shareRate, additive-increase /
// multiplicative-decrease as TCP does): a tick whose produce latency is
// above 1.25× the best while remote bytes were fetched halves the cap
// from what was fetched; a tick within it raises the cap by a quarter
// plus the floor, and the cap is lifted altogether once it is far above
// what readers use (a tick in which they fetched nothing says nothing:
// the cap stays, or the next catch-up would start at full speed). With no producer there is no cap. The floor (two
// chunks a second) keeps every catch-up moving. Pure: the shell
// (Reader.shareLoop) measures and applies.

// shareTick is how often the cap is decided.
const shareTick = 100 * time.Millisecond

// shareInput is what one decision sees.
type shareInput struct {
	Rate    float64       // the cap now, bytes/s; 0: none
	Fetched float64       // bytes/s the reader's GETs fetched over the last tick
	Produce time.Duration // mean produce latency over the last tick; 0: no produce
	Best    time.Duration // bestProduce before this tick; 0: none yet
	Min     float64       // the cap's floor, bytes/s
}

// shareRate returns the cap for the next tick, 0 for none.
func shareRate(in shareInput) float64 {
	if in.Produce <= 0 || in.Best <= 0 {
		return 0
	}
	if in.Fetched > 0 && float64(in.Produce) > 1.25*float64(in.Best) {
		base := in.Fetched
		if in.Rate > 0 {
			base = min(base, in.Rate)
		}
		return max(in.Min, base/2)
	}
	if in.Rate <= 0 {
		return 0
	}
	r := in.Rate*1.25 + in.Min
	if in.Fetched > 0 && r > 8*max(in.Fetched, in.Min) {
		return 0 // far above what readers use: no cap
	}
	return r
}

// bestProduce folds a tick's mean produce latency into the best one:
// the lower of the two, the best drifting up 1 % a tick. A tick without
// produce leaves it.
func bestProduce(best, tick time.Duration) time.Duration {
	if tick <= 0 {
		return best
	}
	if best <= 0 {
		return tick
	}
	return min(tick, time.Duration(math.Ceil(float64(best)*1.01)))
}

// NoteProduce records one produce request's latency (the broker calls it
// for each). The first call starts the fair-share loop.
func (r *Reader) NoteProduce(d time.Duration) {
	r.produceSum.Add(int64(d))
	r.produceN.Add(1)
	r.shareOnce.Do(func() { r.background(r.shareLoop) })
}

// shareLoop decides the cap every shareTick until Close.
func (r *Reader) shareLoop() {
	t := time.NewTicker(shareTick)
	defer t.Stop()
	var best time.Duration
	var rate float64
	last := time.Now()
	floor := float64(2 * r.chunkBytes)
	for {
		select {
		case <-r.ctx.Done():
			return
		case now := <-t.C:
			el := now.Sub(last).Seconds()
			last = now
			var mean time.Duration
			if n := r.produceN.Swap(0); n > 0 {
				mean = time.Duration(r.produceSum.Swap(0) / n)
			} else {
				r.produceSum.Store(0)
			}
			fetched := float64(r.fetchedBytes.Swap(0)) / max(el, 1e-3)
			rate = shareRate(shareInput{Rate: rate, Fetched: fetched, Produce: mean, Best: best, Min: floor})
			best = bestProduce(best, mean)
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
	r.share.setRate(rate, !was)
	r.shareOn.Store(true)
}

// shareState is the fair share's part of a [Reader]: the produce
// latencies and fetched bytes of the current tick, and the cap.
type shareState struct {
	produceSum, produceN atomic.Int64
	fetchedBytes         atomic.Int64
	shareOn              atomic.Bool
	shareBits            atomic.Uint64 // the cap, float64 bits (0: none)
	share                *tokenBucket
}
