package loadgen

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// catchUp runs the catch-up read scenario:
//
//  1. fill: producers write FillBytes as fast as they can (the backlog);
//  2. wait (up to RemoteWait) until the target's remote tier holds the
//     backlog, when a Strata metrics URL is given (strata_tiering_remote_bytes);
//  3. baseline: producers at Rate alone for Warmup + Baseline, measured
//     after the warm-up (ProducerP99Before);
//  4. catch-up: consumers start from the earliest offset while producers
//     go on; measured until the summed lag falls to at most 100 ms of
//     production (CaughtUpSeconds) or Duration passes (-1).
//
// The Produce summary covers phases 3 and 4; the Consume summary covers
// phase 4 (the backlog included).
func (r *runner) catchUp(ctx context.Context) error {
	w := r.w
	res := r.res
	res.CatchUp = &CatchUp{CaughtUpSeconds: -1}

	// 1. Fill, unmeasured.
	fill := new(atomic.Int64)
	fill.Store(size(w.FillBytes))
	fillStart := time.Now()
	ps, err := r.newProducers(0, fill)
	if err != nil {
		return err
	}
	r.launch(ps, ctx, time.Now(), time.Time{})
	r.stopProducers(ps, time.Minute)
	r.recMu.Lock()
	r.pubRecs = nil
	r.recMu.Unlock()
	res.CatchUp.BacklogRecords = r.prod.ivRecords.Swap(0)
	res.CatchUp.BacklogBytes = r.prod.ivBytes.Swap(0)
	res.Notes = append(res.Notes, fmt.Sprintf("backlog: %d records, %.1f MB in %.1fs",
		res.CatchUp.BacklogRecords, float64(res.CatchUp.BacklogBytes)/1e6, time.Since(fillStart).Seconds()))
	if ctx.Err() != nil {
		return fmt.Errorf("loadgen: catch-up: interrupted during the fill")
	}

	defer r.startResources(ctx)()

	// 2. The remote tier.
	if res.Target == "strata" {
		r.waitRemote(ctx, res.CatchUp.BacklogBytes)
	} else {
		res.Notes = append(res.Notes, "no Strata metrics URL: the backlog's tier is unknown (read from wherever the target keeps it)")
	}

	// 3. Producers alone.
	if ps, err = r.newProducers(float64(w.Rate), nil); err != nil {
		return err
	}
	start := time.Now()
	r.measureFrom.Store(start.Add(dur(w.Warmup)).UnixNano())
	stopSampler := r.startSampler(ctx)
	defer stopSampler()
	stopProd, cancelProd := context.WithCancel(ctx)
	defer cancelProd()
	r.launch(ps, stopProd, start, time.Time{})
	sleepCtx(ctx, dur(w.Warmup))
	for _, p := range ps {
		p.rec.CutPhase()
	}
	brokerAt := func() *latencyHist { // the broker's produce latencies so far
		if res.Target != "strata" {
			return nil
		}
		h, _ := scrapeLatency(ctx, r.o.MetricsURL, metricRequestSeconds, "Produce")
		return h
	}
	b0 := brokerAt()
	sleepCtx(ctx, dur(w.Baseline))
	before := newHist()
	for _, p := range ps {
		before.Merge(p.rec.CutPhase())
	}
	b1 := brokerAt()
	res.CatchUp.ProducerP99Before = p99Of(before)
	res.CatchUp.BrokerProduceP99Before = quantileBetween(b0, b1, 0.99)

	// 4. Consumers from the earliest offset.
	stopCons, cancelCons := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCons()
	consStart := time.Now()
	r.consFrom = float64(consStart.UnixNano()-r.measureFrom.Load()) / 1e9
	if err := r.startConsumers(ctx, stopCons, "earliest"); err != nil {
		cancelCons()
		cancelProd()
		r.stopProducers(ps, time.Minute)
		r.stopConsumers()
		return err
	}
	// 100 ms of production, at least one record per partition.
	threshold := max(int64(w.Rate)/10, int64(w.Partitions*w.Topics))
	deadline := consStart.Add(dur(w.Duration))
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if l := r.lag(ctx); l >= 0 && l <= threshold {
			res.CatchUp.CaughtUpSeconds = time.Since(consStart).Seconds()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(consStart)
	// What was read by now is the catch-up's (the series' last sample,
	// taken just after, holds at least as much).
	readRecords, readBytes := r.cons.allRecords.Load(), r.cons.allBytes.Load()
	// The series ends here, caught up (or not): its last, partial sample
	// holds what the consumers read since the last tick and the lag now.
	stopSampler()
	if first := r.cons.first.Load(); first > 0 {
		res.CatchUp.FirstRecordSeconds = time.Unix(0, first).Sub(consStart).Seconds()
	}
	during := newHist()
	for _, p := range ps {
		during.Merge(p.rec.CutPhase())
	}
	res.CatchUp.ProducerP99During = p99Of(during)
	res.CatchUp.BrokerProduceP99During = quantileBetween(b1, brokerAt(), 0.99)
	if res.CatchUp.ProducerP99Before > 0 {
		res.CatchUp.ProducerP99Increase = res.CatchUp.ProducerP99During / res.CatchUp.ProducerP99Before
	}
	cancelProd()
	r.measured = time.Since(time.Unix(0, r.measureFrom.Load()))
	r.stopProducers(ps, time.Minute)
	cancelCons()
	r.stopConsumers()
	// The read rate counts from the consumers' start until caught up (or
	// the end), backlog included.
	res.CatchUp.ReadMBPerSec = float64(readBytes) / 1e6 / elapsed.Seconds()
	res.Consume = Summary{
		Errors:        r.cons.errors.Load(),
		Records:       readRecords,
		Bytes:         readBytes,
		RecordsPerSec: float64(readRecords) / elapsed.Seconds(),
		MBPerSec:      float64(readBytes) / 1e6 / elapsed.Seconds(),
	}
	if f := res.CatchUp.FirstRecordSeconds; f > 0 && elapsed.Seconds() > f {
		res.CatchUp.ReadMBPerSecFirst = float64(readBytes) / 1e6 / (elapsed.Seconds() - f)
	}
	if f := res.CatchUp.FirstRecordSeconds; f > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("consumers' first record %.1fs after their start (group join and first fetch); the read rate counts that wait", f))
	}

	if res.CatchUp.CaughtUpSeconds < 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("consumers did not catch up within %s", w.Duration))
	}
	return nil
}

// waitRemote polls the metrics until strata_tiering_remote_bytes reaches
// half the backlog (segments carry batch overhead; the active segments
// never tier) and strata_tiering_local_bytes, when the node exports it,
// has fallen to half the backlog (local retention has deleted what
// tiered, so the read is from the remote tier, not the local copy), or
// RemoteWait passes, and notes what it saw.
func (r *runner) waitRemote(ctx context.Context, backlog int64) {
	deadline := time.Now().Add(dur(r.w.RemoteWait))
	var remote, local float64
	var hasLocal bool
	for {
		m, err := scrape(ctx, r.o.MetricsURL)
		if err == nil {
			remote, local, hasLocal = 0, 0, false
			for _, t := range r.topics {
				remote += m[fmt.Sprintf("%s{topic=%s}", metricRemoteBytes, t)]
				l, ok := m[fmt.Sprintf("%s{topic=%s}", metricLocalBytes, t)]
				local += l
				hasLocal = hasLocal || ok
			}
			if remote >= float64(backlog)/2 && (!hasLocal || local <= float64(backlog)/2) {
				r.res.Notes = append(r.res.Notes, fmt.Sprintf("remote tier holds %.1f MB of the backlog%s", remote/1e6, localNote(hasLocal, local)))
				return
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.res.Notes = append(r.res.Notes, fmt.Sprintf("remote tier held %.1f MB of the %.1f MB backlog%s after %s: the read is partly or wholly local",
				remote/1e6, float64(backlog)/1e6, localNote(hasLocal, local), r.w.RemoteWait))
			return
		}
		time.Sleep(time.Second)
	}
}

func localNote(has bool, local float64) string {
	if !has {
		return ""
	}
	return fmt.Sprintf(", %.1f MB local", local/1e6)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
