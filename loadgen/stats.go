package loadgen

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
)

// sampleResources scrapes the metrics URL every second until ctx ends and
// keeps the broker's latest CPU rate and resident memory for the sampler
// (a scrape can take longer than the sampler may wait, so it runs apart).
func (r *runner) sampleResources(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	var lastCPU float64
	var lastAt time.Time
	for {
		m, err := scrape(ctx, r.o.MetricsURL)
		at := time.Now()
		if ctx.Err() != nil {
			return
		}
		cpu, hasCPU := m[metricCPUSeconds]
		rss, hasRSS := m[metricRSSBytes]
		if err == nil && !(hasCPU && hasRSS) {
			err = fmt.Errorf("no %s and %s in %s", metricCPUSeconds, metricRSSBytes, r.o.MetricsURL)
		}
		r.brokerMu.Lock()
		r.brokerErr = err
		if err == nil {
			r.brokerRSS = rss
			if !lastAt.IsZero() {
				r.brokerCPU = max(cpu-lastCPU, 0) / at.Sub(lastAt).Seconds()
			}
			lastCPU, lastAt = cpu, at
		} else {
			r.brokerCPU, r.brokerRSS = 0, 0
			lastAt = time.Time{}
		}
		r.brokerMu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// brokerNow is the broker's latest CPU rate and memory (zero: unknown).
func (r *runner) brokerNow() (cpu, rss float64) {
	r.brokerMu.Lock()
	defer r.brokerMu.Unlock()
	return r.brokerCPU, r.brokerRSS
}

// brokerResources summarises the series' broker figures, or says why
// there are none.
func (r *runner) brokerResources() *BrokerResources {
	b := &BrokerResources{MetricsURL: r.o.MetricsURL}
	var cpuSum, rssSum float64
	var cpuN int
	for _, s := range r.res.Series {
		if s.BrokerRSSBytes > 0 {
			b.Samples++
			rssSum += s.BrokerRSSBytes
			b.RSSBytesMax = max(b.RSSBytesMax, s.BrokerRSSBytes)
		}
		if s.BrokerCPUCores > 0 {
			cpuN++
			cpuSum += s.BrokerCPUCores
			b.CPUCoresMax = max(b.CPUCoresMax, s.BrokerCPUCores)
		}
	}
	if b.Samples > 0 {
		b.Sampled = true
		b.RSSBytesMean = rssSum / float64(b.Samples)
		if cpuN > 0 {
			b.CPUCoresMean = cpuSum / float64(cpuN)
		}
		b.CPUSeconds, b.CPUSecondsPerGBProduced, b.CPUSecondsPerGBConsumed = cpuPerGB(r.res.Series, r.res.Duration, r.res.Produce.Bytes, r.res.Consume.Bytes)
		return b
	}
	r.brokerMu.Lock()
	err := r.brokerErr
	r.brokerMu.Unlock()
	switch {
	case r.o.MetricsURL == "":
		b.Reason = "no --metrics-url given: the broker's CPU and memory were not sampled"
	case err != nil:
		b.Reason = "the broker's CPU and memory could not be sampled: " + strings.TrimPrefix(err.Error(), "loadgen: ")
	default:
		b.Reason = "no sample of the broker's CPU and memory was taken (run too short)"
	}
	return b
}

// cpuPerGB is the broker's CPU-seconds over the measured phase [0,
// measured] and per GB produced and consumed in it. The phase's samples
// that carry a CPU rate (one scraped over the last second; zero: not
// known) give its mean, times the phase's length: a missed scrape leaves
// a sample out rather than counting as idle. Zero when no sample has a
// rate, or (per GB) when that side moved nothing.
func cpuPerGB(series []Sample, measured float64, produced, consumed int64) (cpuSec, perGBProduced, perGBConsumed float64) {
	var sum float64
	var n int
	for _, s := range series {
		secs := s.Seconds
		if secs == 0 {
			secs = 1 // version 1
		}
		if s.BrokerCPUCores > 0 && s.T-secs >= -0.05 && s.T <= measured+0.05 {
			sum += s.BrokerCPUCores
			n++
		}
	}
	if n == 0 || !(measured > 0) {
		return 0, 0, 0
	}
	cpuSec = sum / float64(n) * measured
	if produced > 0 {
		perGBProduced = cpuSec / (float64(produced) / 1e9)
	}
	if consumed > 0 {
		perGBConsumed = cpuSec / (float64(consumed) / 1e9)
	}
	return cpuSec, perGBProduced, perGBConsumed
}

// stabilityOf is the spread of the per-second rates over the measured
// phase [0, measured], warm-up left out. A sample shorter than a quarter
// second (the last one may be) is left out too: its rate is noise. The
// measured phase ends at the last acknowledgement, so the produce side's
// sample that straddles that end holds only measured records: its rate
// is over the part inside (without it, acks that bunch up in the final
// flush of a loaded run were in the totals and in no sample). The
// consume side counts from its first sample with records at or after
// consFrom (the catch-up's consumers' start; 0 otherwise): before it the
// consumers were joining their group, not reading slowly.
func stabilityOf(series []Sample, measured, consFrom float64) *Stability {
	secs := func(s Sample) float64 {
		if s.Seconds == 0 {
			return 1 // version 1
		}
		return s.Seconds
	}
	// span is how much of s lies in [from, measured] (clipped at the end
	// when clip), 0 when s is not in it.
	span := func(s Sample, from float64, clip bool) float64 {
		start, end := s.T-secs(s), s.T
		if start < from-0.05 {
			return 0
		}
		if end > measured+0.05 {
			if !clip || start >= measured {
				return 0
			}
			end = measured
		}
		if d := end - start; d >= 0.25 {
			return d
		}
		return 0
	}
	rates := func(from float64, clip bool, recs, bytes func(Sample) int64) Rates {
		var rs, mbs []float64
		for _, s := range series {
			if d := span(s, from, clip); d > 0 {
				rs = append(rs, float64(recs(s))/d)
				mbs = append(mbs, float64(bytes(s))/1e6/d)
			}
		}
		out := Rates{Samples: len(rs)}
		if len(rs) == 0 {
			return out
		}
		out.MinRecordsPerSec, out.MeanRecordsPerSec, out.MaxRecordsPerSec, out.StddevRecordsPerSec = spread(rs)
		out.MinMBPerSec, out.MeanMBPerSec, out.MaxMBPerSec, out.StddevMBPerSec = spread(mbs)
		if out.MeanRecordsPerSec > 0 {
			out.CV = out.StddevRecordsPerSec / out.MeanRecordsPerSec
		}
		return out
	}
	consStart := math.Inf(1)
	for _, s := range series {
		if s.ConsumeRecords > 0 && s.T-secs(s) >= consFrom-0.05 {
			consStart = s.T - secs(s)
			break
		}
	}
	return &Stability{
		Produce: rates(0, true, func(s Sample) int64 { return s.ProduceRecords }, func(s Sample) int64 { return s.ProduceBytes }),
		Consume: rates(max(consStart, 0), false, func(s Sample) int64 { return s.ConsumeRecords }, func(s Sample) int64 { return s.ConsumeBytes }),
	}
}

// spread is min, mean, max and population standard deviation of xs.
func spread(xs []float64) (lo, mean, hi, sd float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return lo, mean, hi, math.Sqrt(sd / float64(len(xs)))
}
