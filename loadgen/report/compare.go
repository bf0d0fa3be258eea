package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/strata-io/strata/loadgen"
)

// runColors colour the runs of a comparison, in order; they repeat past
// eight runs (the table's swatches still tell them apart by row).
var runColors = []string{"#0b5fff", "#e4572e", "#2e8b57", "#8a2be2", "#b8860b", "#c71585", "#00a3a3", "#555555"}

type compareRow struct {
	Label, Scenario, Target, Color           string
	RecordsPerSec, MBPerSec, ConsumeMBPerSec string
	PubP50, PubP95, PubP99, PubP999          string
	E2EP50, E2EP99, E2EP999                  string
	Errors                                   string
	ProduceCV, BrokerCPU, BrokerRSS          string // version 2
	Versions                                 string // loadgen and broker builds
}

// WriteHTMLCompare writes one page comparing runs (for example Strata and
// kfake under the same scenario): a table with a row per run and the
// charts with one line per run (produce throughput, publish latency
// distribution, publish p99 over time, lag, errors, broker CPU). A nil run
// is an error.
func WriteHTMLCompare(w io.Writer, runs []*loadgen.Result) error {
	if len(runs) == 0 {
		return ErrNoResult
	}
	for i, r := range runs {
		if r == nil {
			return fmt.Errorf("report: run %d is nil: %w", i, ErrNoResult)
		}
	}
	v := view{Title: "Strata load report: comparison of " + strconv.Itoa(len(runs)) + " runs", IsCompare: true}
	thr := panel{title: "Produce throughput (MB/s)", xLabel: "time (s, negative = warm-up)", yLabel: "MB/s (10^6 B/s)"}
	dist := panel{title: "Publish latency by percentile", xLabel: "percentile (log scale of 1/(1−p))", yLabel: "latency (ms)"}
	p99 := panel{title: "Publish p99 per second", xLabel: "time (s, negative = warm-up)", yLabel: "p99 latency (ms)"}
	lag := panel{title: "Consumer lag", xLabel: "time (s, negative = warm-up)", yLabel: "lag (records)"}
	errs := panel{title: "Errors per second (produce and consume)", xLabel: "time (s, negative = warm-up)", yLabel: "errors/s",
		noData: "no data: no run records per-second errors (result version 1)"}
	cpu := panel{title: "Broker CPU (cores)", xLabel: "time (s, negative = warm-up)", yLabel: "CPU s per s",
		noData: "no data: no run sampled the broker's /metrics"}
	t0, t1 := math.Inf(1), math.Inf(-1)
	maxX := 0.0
	for i, r := range runs {
		color := runColors[i%len(runColors)]
		label := fmt.Sprintf("%d. %s", i+1, orNA(r.Target))
		v.Compare = append(v.Compare, compareRow{
			Label: label, Scenario: orNA(r.Scenario), Target: orNA(r.Target), Color: color,
			RecordsPerSec: num(r.Produce.RecordsPerSec), MBPerSec: num(r.Produce.MBPerSec), ConsumeMBPerSec: num(r.Consume.MBPerSec),
			PubP50: num(r.Produce.Latency.P50), PubP99: num(r.Produce.Latency.P99), PubP999: num(r.Produce.Latency.P999),
			E2EP50: num(r.EndToEnd.P50), E2EP99: num(r.EndToEnd.P99), E2EP999: num(r.EndToEnd.P999),
			Errors: strconv.FormatInt(r.Produce.Errors+r.Consume.Errors, 10),
			PubP95: num(r.Produce.Latency.P95), ProduceCV: "n/a", BrokerCPU: "n/a", BrokerRSS: "n/a", Versions: "n/a",
		})
		row := &v.Compare[len(v.Compare)-1]
		if r.Version < 2 {
			row.PubP95 = "n/a"
		}
		if r.Stability != nil {
			row.ProduceCV = num(r.Stability.Produce.CV)
		}
		if b := r.BrokerResources; b != nil && b.Sampled {
			row.BrokerCPU, row.BrokerRSS = num(b.CPUCoresMean), bytesStr(b.RSSBytesMax)
		}
		if e := r.Environment; e != nil {
			row.Versions = "loadgen " + orNA(e.Loadgen.Version) + " " + shortCommit(e.Loadgen.Commit)
			if e.Broker != nil {
				row.Versions += ", broker " + orNA(e.Broker.Version) + " " + shortCommit(e.Broker.Commit)
			}
			row.Versions += "; " + orNA(e.CPUModel) + ", " + strconv.Itoa(e.CPUCores) + " cores"
		}
		samples := append([]loadgen.Sample(nil), r.Series...)
		sort.SliceStable(samples, func(i, j int) bool { return samples[i].T < samples[j].T })
		if len(samples) > 0 {
			a, b := timeRange(samples)
			t0, t1 = math.Min(t0, a), math.Max(t1, b)
		}
		st, sp, sl := series{name: label, color: color}, series{name: label, color: color}, series{name: label, color: color}
		for _, s := range samples {
			st.pts = append(st.pts, point{s.T, perSec(s, s.ProduceBytes) / 1e6})
			y := s.PublishP99
			if !(y > 0) {
				y = math.NaN()
			}
			sp.pts = append(sp.pts, point{s.T, y})
			sl.pts = append(sl.pts, point{s.T, float64(s.Lag)})
		}
		se, sc := series{name: label, color: color}, series{name: label, color: color}
		sampled := r.BrokerResources != nil && r.BrokerResources.Sampled
		for _, s := range samples {
			if r.Version >= 2 {
				se.pts = append(se.pts, point{s.T, perSec(s, s.ProduceErrors+s.ConsumeErrors)})
			}
			if sampled && s.BrokerRSSBytes > 0 {
				sc.pts = append(sc.pts, point{s.T, s.BrokerCPUCores})
			} else if sampled {
				sc.pts = append(sc.pts, point{s.T, math.NaN()})
			}
		}
		errs.series = append(errs.series, se)
		cpu.series = append(cpu.series, sc)
		sd := series{name: label, color: color}
		for _, p := range r.Histogram.Publish {
			x := percentileX(p.Percentile)
			if finite(x) && x > maxX {
				maxX = x
			}
			sd.pts = append(sd.pts, point{x, p.ValueMs})
		}
		thr.series = append(thr.series, st)
		p99.series = append(p99.series, sp)
		lag.series = append(lag.series, sl)
		dist.series = append(dist.series, sd)
	}
	if t0 > t1 {
		t0, t1 = 0, 1
	}
	nines := max(2, min(int(math.Ceil(maxX-1e-9)), 7))
	for i := range dist.series {
		for j, p := range dist.series[i].pts {
			if math.IsInf(p.x, 1) || p.x > float64(nines) {
				dist.series[i].pts[j].x = float64(nines)
			}
		}
	}
	for _, p := range []*panel{&thr, &p99, &lag, &errs, &cpu} {
		p.x0, p.x1 = t0, t1
		p.y1 = niceMax(maxY(p.series...))
	}
	dist.x1, dist.y1, dist.xTicks = float64(nines), niceMax(maxY(dist.series...)), percentileTicks(nines)
	v.Charts = []chartView{
		{"throughput", "Produce MB/s per second, one line per run.", chart{name: "throughput", title: "Throughput", panels: []panel{thr}}.render()},
		{"latency-distribution", "Publish latency by percentile, one line per run.", chart{name: "latency-distribution", title: "Latency by percentile", panels: []panel{dist}}.render()},
		{"latency-over-time", "Publish p99 of each second, one line per run.", chart{name: "latency-over-time", title: "p99 over time", panels: []panel{p99}}.render()},
		{"lag", "Consumer lag, one line per run.", chart{name: "lag", title: "Consumer lag", panels: []panel{lag}}.render()},
		{"errors", "Produce and consume errors per second, one line per run.", chart{name: "errors", title: "Errors", panels: []panel{errs}}.render()},
		{"broker-resources", "The broker's CPU (CPU seconds per second), one line per run that sampled its /metrics.", chart{name: "broker-resources", title: "Broker CPU", panels: []panel{cpu}}.render()},
	}
	if err := pageTemplate.Execute(w, v); err != nil {
		return fmt.Errorf("report: writing HTML: %w", err)
	}
	return nil
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return orNA(c)
}
