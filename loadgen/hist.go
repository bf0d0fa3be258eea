package loadgen

import (
	"math"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds from 1 µs to one hour with three
// significant digits (0.1% resolution).
const (
	histMinMicros = 1
	histMaxMicros = int64(time.Hour / time.Microsecond)
	histSigFigs   = 3
)

func newHist() *hdr.Histogram { return hdr.New(histMinMicros, histMaxMicros, histSigFigs) }

// Recorder collects one producer's or consumer's latencies. A latency is
// always done - intended, where intended is the record's slot in the
// open-loop schedule (publish) or the send time it carries (end to end).
// Safe for concurrent use (promises and the sampler run on other
// goroutines).
type Recorder struct {
	mu sync.Mutex // guards the fields below
	// total holds the measured phase: records intended at or after
	// measureFrom (warm-up records are excluded by their intended time).
	total       *hdr.Histogram
	measureFrom int64          // unix nanos; math.MaxInt64 until the warm-up ends
	interval    *hdr.Histogram // since the sampler's last tick
	phase       *hdr.Histogram // since the last CutPhase
	spare       *hdr.Histogram
}

// NewRecorder returns a recorder whose measured phase has not begun.
func NewRecorder() *Recorder {
	return &Recorder{total: newHist(), interval: newHist(), phase: newHist(), spare: newHist(), measureFrom: math.MaxInt64}
}

// Record adds done - intended (clamped to the histogram's range).
func (r *Recorder) Record(intended, done time.Time) {
	us := done.Sub(intended).Microseconds()
	us = min(max(us, histMinMicros), histMaxMicros)
	in := intended.UnixNano()
	r.mu.Lock()
	r.interval.RecordValue(us)
	r.phase.RecordValue(us)
	if in >= r.measureFrom {
		r.total.RecordValue(us)
	}
	r.mu.Unlock()
}

// Measure starts the measured phase: records intended at or after t count.
func (r *Recorder) Measure(t time.Time) {
	r.mu.Lock()
	r.measureFrom = t.UnixNano()
	r.total.Reset()
	r.mu.Unlock()
}

// drainInterval merges the interval histogram into into and resets it.
func (r *Recorder) drainInterval(into *hdr.Histogram) {
	r.mu.Lock()
	iv := r.interval
	r.interval, r.spare = r.spare, iv
	r.mu.Unlock()
	into.Merge(iv)
	iv.Reset()
}

// CutPhase returns a copy of the histogram since the last CutPhase and
// starts a new phase.
func (r *Recorder) CutPhase() *hdr.Histogram {
	fresh := newHist()
	r.mu.Lock()
	p := r.phase
	r.phase = fresh
	r.mu.Unlock()
	return p
}

// mergeTotal merges the measured-phase histogram into into.
func (r *Recorder) mergeTotal(into *hdr.Histogram) {
	r.mu.Lock()
	into.Merge(r.total)
	r.mu.Unlock()
}

func ms(us int64) float64 { return float64(us) / 1000 }

// latencyOf summarises h in milliseconds.
func latencyOf(h *hdr.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		Count: h.TotalCount(),
		Mean:  h.Mean() / 1000,
		P50:   ms(h.ValueAtPercentile(50)),
		P75:   ms(h.ValueAtPercentile(75)),
		P90:   ms(h.ValueAtPercentile(90)),
		P95:   ms(h.ValueAtPercentile(95)),
		P99:   ms(h.ValueAtPercentile(99)),
		P999:  ms(h.ValueAtPercentile(99.9)),
		P9999: ms(h.ValueAtPercentile(99.99)),
		Max:   ms(h.Max()),
	}
}

// p99Of is h's 99th percentile in ms (0 when empty).
func p99Of(h *hdr.Histogram) float64 {
	if h.TotalCount() == 0 {
		return 0
	}
	return ms(h.ValueAtPercentile(99))
}

// percentilesOf returns h's distribution at percentiles that halve the
// remaining tail four times per decade (0, 43.8, 68.4, 82.2, 90, ...,
// 99.999, 100), the usual HdrHistogram plot axis.
func percentilesOf(h *hdr.Histogram) []Percentile {
	total := h.TotalCount()
	if total == 0 {
		return nil
	}
	var out []Percentile
	add := func(p float64) {
		out = append(out, Percentile{Percentile: p, ValueMs: ms(h.ValueAtPercentile(p)), Count: int64(math.Round(p / 100 * float64(total)))})
	}
	add(0)
	for k := 1; k <= 20; k++ {
		add(100 * (1 - math.Pow(10, -float64(k)/4)))
	}
	add(100)
	return out
}
