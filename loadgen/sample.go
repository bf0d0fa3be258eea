package loadgen

// The sampler: once a second (and once more when stopped) it turns what the
// producers and consumers recorded since the last tick into one point of
// the live line and the JSON result's series (rates, latency percentiles
// of the interval, consumer lag). With a metrics URL the brokers' resource
// usage is sampled alongside (stats.go).

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// startSampler starts the sampler and returns the function that stops
// it (idempotent): the sampler then takes one last, partial sample, so
// what was produced and consumed since the last tick is in the series
// too — a catch-up whose consumers read the whole backlog in the last
// fraction of a second shows that, not a flat zero.
func (r *runner) startSampler(ctx context.Context) (stop func()) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go r.sampler(sctx, done)
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

// startResources starts scraping the broker's CPU and memory (when there
// is a metrics URL) and returns the function that stops it. It starts
// before the clients connect, not with the sampler: a CPU rate needs two
// scrapes, and on a loaded machine a scrape can take a second or more,
// so started with the measured phase a short run's first seconds (or all
// of them) had no CPU figure.
func (r *runner) startResources(ctx context.Context) (stop func()) {
	if r.o.MetricsURL == "" {
		return func() {}
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go r.sampleResources(sctx, done)
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

// sampler appends one Sample per second until ctx ends, then a last one
// for the partial interval, and prints the live line to o.Progress.
func (r *runner) sampler(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	ivPub, ivE2E := newHist(), newHist()
	r.liveMu.Lock()
	r.livePub, r.liveE2E = newHist(), newHist()
	r.liveMu.Unlock()
	prev := time.Now()
	r.lastSelfCPU = selfCPU()
	for {
		select {
		case <-ctx.Done():
			// The interval since the last tick: its lag is read with a
			// context of its own (ctx is done).
			now := time.Now()
			if now.Sub(prev) >= 10*time.Millisecond {
				lctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				r.sample(lctx, now, prev, ivPub, ivE2E)
				cancel()
			}
			return
		case now := <-tk.C:
			r.sample(ctx, now, prev, ivPub, ivE2E)
			prev = now
		}
	}
}

// sample appends the Sample of the interval (prev, now].
func (r *runner) sample(ctx context.Context, now, prev time.Time, ivPub, ivE2E *hdr.Histogram) {
	r.recMu.Lock()
	pubs, e2es := append([]*Recorder(nil), r.pubRecs...), append([]*Recorder(nil), r.e2eRecs...)
	r.recMu.Unlock()
	ivPub.Reset()
	ivE2E.Reset()
	for _, x := range pubs {
		x.drainInterval(ivPub)
	}
	for _, x := range e2es {
		x.drainInterval(ivE2E)
	}
	t := float64(now.UnixNano()-r.measureFrom.Load()) / 1e9
	if r.measureFrom.Load() == math.MaxInt64 {
		t = -1
	}
	s := Sample{
		T:              math.Round(t*1000) / 1000,
		Seconds:        math.Round(now.Sub(prev).Seconds()*1000) / 1000,
		ProduceRecords: r.prod.ivRecords.Swap(0),
		ProduceBytes:   r.prod.ivBytes.Swap(0),
		ConsumeRecords: r.cons.ivRecords.Swap(0),
		ConsumeBytes:   r.cons.ivBytes.Swap(0),
		PublishP99:     p99Of(ivPub),
		EndToEndP99:    p99Of(ivE2E),
		Lag:            r.lag(ctx),
		ProduceErrors:  r.prod.ivErrs.Swap(0),
		ConsumeErrors:  r.cons.ivErrs.Swap(0),
	}
	s.BrokerCPUCores, s.BrokerRSSBytes = r.brokerNow()
	if cpu := selfCPU(); now.After(prev) {
		s.LoadgenCPUCores = max(cpu-r.lastSelfCPU, 0).Seconds() / now.Sub(prev).Seconds()
		r.lastSelfCPU = cpu
	}
	r.liveMu.Lock()
	if t >= 0 {
		r.livePub.Merge(ivPub)
		r.liveE2E.Merge(ivE2E)
	}
	soFar := p99Of(r.livePub)
	r.liveMu.Unlock()
	r.seriesMu.Lock()
	r.series = append(r.series, s)
	r.seriesMu.Unlock()
	if r.o.Progress != nil {
		perSec := func(n int64) float64 { return float64(n) / max(s.Seconds, 0.001) }
		fmt.Fprintf(r.o.Progress, "%s %7.1fs  produce %9.0f rec/s %8.2f MB/s  p99 %8.2f ms (so far %.2f)  consume %9.0f rec/s %8.2f MB/s  e2e p99 %8.2f ms  lag %d\n",
			r.res.Scenario, s.T, perSec(s.ProduceRecords), perSec(s.ProduceBytes)/1e6, s.PublishP99, soFar,
			perSec(s.ConsumeRecords), perSec(s.ConsumeBytes)/1e6, s.EndToEndP99, s.Lag)
	}
}
