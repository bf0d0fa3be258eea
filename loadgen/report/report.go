package report

import (
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-io/strata/loadgen"
)

// ErrNoResult is returned by [WriteHTML] and [WriteHTMLCompare] when there
// is no result to render.
var ErrNoResult = errors.New("report: no result to render")

// WriteHTML writes r as one self-contained HTML page to w. It never panics
// on odd values (zero, negative, NaN or infinite numbers, empty series):
// such values render as "n/a" or are left out of a chart, and a chart with
// nothing to draw says so.
func WriteHTML(w io.Writer, r *loadgen.Result) error {
	if r == nil {
		return ErrNoResult
	}
	v := buildView(r)
	if err := pageTemplate.Execute(w, v); err != nil {
		return fmt.Errorf("report: writing HTML: %w", err)
	}
	return nil
}

// view is what the page template reads: strings already formatted, charts
// already drawn.
type view struct {
	Title      string
	R          *loadgen.Result
	Rows       []summaryRow
	Charts     []chartView
	Workload   []kv
	CatchUp    []kv
	Cost       []kv
	Machine    []kv
	Env        []kv
	Stability  []stabilityRow
	Broker     []kv
	BrokerNote string // why the broker's CPU and memory are missing
	CostNote   string // why there is no cost section
	Errors     []string
	Notes      []string
	Palette    []paletteEntry
	Generated  string
	Compare    []compareRow // WriteHTMLCompare only
	IsCompare  bool
	HasConsume bool
}

type chartView struct {
	Name    string
	Caption string
	SVG     template.HTML
}

type kv struct{ K, V string }

type paletteEntry struct{ Chart, Series, Color string }

type summaryRow struct {
	Side                                            string
	Records, RecordsPerSec, MBPerSec, Errors        string
	Mean, P50, P75, P90, P95, P99, P999, P9999, Max string
}

type stabilityRow struct {
	Side, Samples                      string
	MinRec, MeanRec, MaxRec, SDRec, CV string
	MinMB, MeanMB, MaxMB, SDMB         string
}

func buildView(r *loadgen.Result) view {
	samples := append([]loadgen.Sample(nil), r.Series...)
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].T < samples[j].T })
	hasConsume := r.Workload.Consumers > 0 || r.Consume.Records > 0
	for _, s := range samples {
		if s.ConsumeRecords != 0 || s.ConsumeBytes != 0 || s.Lag != 0 || s.EndToEndP99 != 0 {
			hasConsume = true
		}
	}
	v := view{
		Title:      "Strata load report: " + orNA(r.Scenario),
		R:          r,
		HasConsume: hasConsume,
		Errors:     r.Errors,
		Notes:      r.Notes,
	}
	v.Rows = append(v.Rows, sideRow("produce", r.Produce, r.Produce.Latency, r.Version))
	if hasConsume {
		row := sideRow("consume", r.Consume, loadgen.Latency{}, r.Version)
		row.Mean, row.P50, row.P75, row.P90, row.P95, row.P99, row.P999, row.P9999, row.Max = "", "", "", "", "", "", "", "", ""
		v.Rows = append(v.Rows, row)
		e := latencyRow("end-to-end", r.EndToEnd, r.Version)
		e.Records = strconv.FormatInt(r.EndToEnd.Count, 10)
		v.Rows = append(v.Rows, e)
	}
	v.Charts = []chartView{
		{"throughput", "Throughput per second, produce and consume: records/s (top) and MB/s of keys and values (bottom).", throughputChart(samples, hasConsume).render()},
		{"latency-distribution", "Latency by percentile over the measured phase (HdrHistogram), publish (intended send → ack) and end-to-end (record timestamp → receipt). The x axis is logarithmic in 1/(1−p).", latencyDistChart(r.Histogram, hasConsume).render()},
		{"latency-over-time", "p99 latency of each second.", latencyTimeChart(samples, hasConsume).render()},
		{"lag", "Consumer lag in records, summed over groups and partitions.", lagChart(samples, hasConsume).render()},
		{"errors", "Errors per second: records the cluster refused or that timed out (produce), failed fetches (consume).", errorsChart(r, samples).render()},
		{"broker-resources", "The broker process's CPU (CPU seconds per second: 1.0 = one core busy) and resident memory, from process_cpu_seconds_total and process_resident_memory_bytes in its /metrics, sampled every second.", brokerChart(r, samples).render()},
	}
	for _, name := range ChartNames {
		ss := make([]string, 0, len(Palette[name]))
		for s := range Palette[name] {
			ss = append(ss, s)
		}
		sort.Strings(ss)
		for _, s := range ss {
			v.Palette = append(v.Palette, paletteEntry{name, s, Palette[name][s]})
		}
	}
	v.Workload = workloadKV(r)
	v.Env = envKV(r)
	v.Stability = stabilityRows(r, hasConsume)
	v.Broker, v.BrokerNote = brokerKV(r)
	if r.Cost == nil {
		v.CostNote = "Object-store cost not measured: it needs a Strata node's admin /metrics (--metrics-url)."
		if r.Target == "strata" {
			v.CostNote = "Object-store cost not measured: the metrics could not be read at the end of the run (see the notes)."
		}
	}
	if c := r.CatchUp; c != nil {
		caught := num(c.CaughtUpSeconds) + " s"
		if c.CaughtUpSeconds < 0 {
			caught = "never caught up"
		}
		v.CatchUp = []kv{
			{"backlog records", strconv.FormatInt(c.BacklogRecords, 10)},
			{"backlog bytes", bytesStr(float64(c.BacklogBytes))},
			{"caught up after", caught},
			{"consumers' first record after", firstRecord(c.FirstRecordSeconds)},
			{"read MB/s", num(c.ReadMBPerSec)},
			{"read MB/s from the first record", numOrNA(c.ReadMBPerSecFirst)},
			{"producer p99 before (ms)", num(c.ProducerP99Before)},
			{"producer p99 during (ms)", num(c.ProducerP99During)},
			{"producer p99 increase", num(c.ProducerP99Increase) + "×"},
		}
	}
	if c := r.Cost; c != nil {
		v.Cost = []kv{
			{"metrics", orNA(c.MetricsURL)},
			{"PUTs", num(c.Puts)},
			{"GETs", num(c.Gets)},
			{"LISTs", num(c.Lists)},
			{"DELETEs", num(c.Deletes)},
			{"bytes put", bytesStr(c.BytesPut)},
			{"bytes got", bytesStr(c.BytesGot)},
			{"PUTs per GiB produced", num(c.PutsPerGiBIn)},
			{"GETs per GiB consumed", num(c.GetsPerGiBOut)},
			{"price per 1000 PUT (USD)", num(c.PricePerKPut)},
			{"price per 1000 GET (USD)", num(c.PricePerKGet)},
			{"estimated request cost (USD)", num(c.EstimatedCostUSD)},
		}
		if c.RemoteReadBytes > 0 {
			v.Cost = append(v.Cost,
				kv{"remote reads: bytes returned to fetches", bytesStr(c.RemoteReadBytes)},
				kv{"remote reads: GETs per GiB read", num(c.RemoteGetsPerGiBRead)},
				kv{"remote reads: chunk cache hit ratio", num(c.CacheHitRatio)})
		}
	}
	if m := r.Machine; m != nil {
		v.Machine = []kv{
			{"sequential file write (MB/s)", num(m.SeqWriteMBPerSec)},
			{"loopback sendfile (MB/s)", num(m.LoopbackSendfileMBs)},
			{"produce MB/s / sequential write", ratio(r.Produce.MBPerSec, m.SeqWriteMBPerSec)},
			{"consume MB/s / loopback sendfile", ratio(r.Consume.MBPerSec, m.LoopbackSendfileMBs)},
		}
		if g := m.S3Get; g != nil {
			v.Machine = append(v.Machine, kv{"object store ranged GET, one stream (MB/s)", num(g.MBPerSec)})
		}
	}
	return v
}

func numOrNA(v float64) string {
	if v <= 0 {
		return "n/a"
	}
	return num(v)
}

func firstRecord(s float64) string {
	if s <= 0 {
		return "n/a"
	}
	return num(s) + " s (group join and first fetch, included in the read rate)"
}

func sideRow(side string, s loadgen.Summary, l loadgen.Latency, version int) summaryRow {
	row := latencyRow(side, l, version)
	row.Records = strconv.FormatInt(s.Records, 10)
	row.RecordsPerSec = num(s.RecordsPerSec)
	row.MBPerSec = num(s.MBPerSec)
	row.Errors = strconv.FormatInt(s.Errors, 10)
	return row
}

// latencyRow formats l; results before version 2 have no p75 and p95.
func latencyRow(side string, l loadgen.Latency, version int) summaryRow {
	row := summaryRow{
		Side: side,
		Mean: num(l.Mean), P50: num(l.P50), P75: num(l.P75), P90: num(l.P90), P95: num(l.P95), P99: num(l.P99),
		P999: num(l.P999), P9999: num(l.P9999), Max: num(l.Max),
	}
	if version < 2 {
		row.P75, row.P95 = "n/a", "n/a"
	}
	return row
}

// envKV is the environment table, or a line saying the result has none.
func envKV(r *loadgen.Result) []kv {
	e := r.Environment
	if e == nil {
		return []kv{{"environment", "not recorded (result version " + strconv.Itoa(r.Version) + ")"}}
	}
	broker := "unknown: " + orNA(e.BrokerBuild)
	if e.Broker != nil {
		broker = orNA(e.Broker.Version) + ", commit " + orNA(e.Broker.Commit) + ", " + orNA(e.Broker.GoVersion)
	}
	out := []kv{
		{"loadgen build", orNA(e.Loadgen.Version) + ", commit " + orNA(e.Loadgen.Commit) + ", " + orNA(e.Loadgen.GoVersion)},
		{"broker build", broker},
		{"CPU (loadgen machine)", orNA(e.CPUModel) + ", " + strconv.Itoa(e.CPUCores) + " cores"},
		{"memory (loadgen machine)", bytesGiB(e.MemoryBytes)},
		{"kernel", orNA(e.OS) + "/" + orNA(e.Arch) + " " + orNA(e.Kernel)},
		{"host", orNA(e.Hostname)},
		{"cluster", orNA(e.ClusterID) + ", " + strconv.Itoa(e.Brokers) + " broker(s)"},
		{"replication factor (as created)", strconv.Itoa(e.ReplicationFactor)},
		{"producer acks", orNA(e.Acks)},
		{"producer compression", orNA(e.Compression)},
	}
	out = append(out, kv{"broker configs", joinMap(e.BrokerConfigs)}, kv{"topic configs", joinMap(e.TopicConfigs)})
	return out
}

func bytesGiB(b int64) string {
	if b <= 0 {
		return "n/a"
	}
	return num(float64(b)/(1<<30)) + " GiB"
}

func joinMap(m map[string]string) string {
	if len(m) == 0 {
		return "n/a"
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ", ")
}

func stabilityRows(r *loadgen.Result, hasConsume bool) []stabilityRow {
	st := r.Stability
	if st == nil {
		return nil
	}
	row := func(side string, x loadgen.Rates) stabilityRow {
		return stabilityRow{Side: side, Samples: strconv.Itoa(x.Samples),
			MinRec: num(x.MinRecordsPerSec), MeanRec: num(x.MeanRecordsPerSec), MaxRec: num(x.MaxRecordsPerSec), SDRec: num(x.StddevRecordsPerSec), CV: num(x.CV),
			MinMB: num(x.MinMBPerSec), MeanMB: num(x.MeanMBPerSec), MaxMB: num(x.MaxMBPerSec), SDMB: num(x.StddevMBPerSec)}
	}
	out := []stabilityRow{row("produce", st.Produce)}
	if hasConsume {
		out = append(out, row("consume", st.Consume))
	}
	return out
}

// brokerKV is the broker resources table, or the reason there is none.
func brokerKV(r *loadgen.Result) ([]kv, string) {
	b := r.BrokerResources
	switch {
	case b == nil:
		return nil, "The broker's CPU and memory were not sampled: result version " + strconv.Itoa(r.Version) + " does not record them."
	case !b.Sampled:
		return nil, "The broker's CPU and memory were not sampled: " + orNA(b.Reason) + "."
	}
	out := []kv{
		{"metrics", orNA(b.MetricsURL)},
		{"samples (1 s)", strconv.Itoa(b.Samples)},
		{"CPU cores, mean", num(b.CPUCoresMean)},
		{"CPU cores, max", num(b.CPUCoresMax)},
		{"resident memory, mean", bytesStr(b.RSSBytesMean)},
		{"resident memory, max", bytesStr(b.RSSBytesMax)},
	}
	if b.CPUCoresMean > 0 && r.Produce.MBPerSec > 0 {
		out = append(out, kv{"produce MB/s per broker core", num(r.Produce.MBPerSec / b.CPUCoresMean)})
	}
	return out, ""
}

func workloadKV(r *loadgen.Result) []kv {
	w := r.Workload
	out := []kv{
		{"scenario", orNA(r.Scenario)},
		{"target", orNA(r.Target)},
		{"brokers", orNA(strings.Join(r.Brokers, ", "))},
		{"started", orNA(r.StartedAt)},
		{"measured seconds", num(r.Duration)},
		{"workload name", orNA(w.Name)},
		{"topic", orNA(w.Topic)},
		{"topics", strconv.Itoa(w.Topics)},
		{"partitions per topic", strconv.Itoa(w.Partitions)},
		{"replication factor", strconv.Itoa(w.ReplicationFactor)},
		{"create topics", boolPtr(w.CreateTopics)},
	}
	if len(w.TopicConfigs) > 0 {
		ks := make([]string, 0, len(w.TopicConfigs))
		for k := range w.TopicConfigs {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		parts := make([]string, len(ks))
		for i, k := range ks {
			parts[i] = k + "=" + w.TopicConfigs[k]
		}
		out = append(out, kv{"topic configs", strings.Join(parts, ", ")})
	}
	out = append(out,
		kv{"record size", sizeDist(w.RecordSize)},
		kv{"keys", orNA(w.Keys)},
		kv{"key space", strconv.Itoa(w.KeySpace)},
		kv{"zipf s", num(w.ZipfS)},
		kv{"compression", orNA(w.Compression)},
		kv{"acks", orNA(w.Acks)},
		kv{"linger", orNA(w.Linger)},
		kv{"batch bytes", orNA(w.BatchBytes)},
		kv{"idempotent", boolPtr(w.Idempotent)},
		kv{"producers", strconv.Itoa(w.Producers)},
		kv{"consumers per group", strconv.Itoa(w.Consumers)},
		kv{"groups", strconv.Itoa(w.Groups)},
		kv{"consume from", orNA(w.ConsumeFrom)},
		kv{"rate (records/s)", rate(w.Rate)},
		kv{"duration", orNA(w.Duration)},
		kv{"warm-up", orNA(w.Warmup)},
	)
	if w.FillBytes != "" {
		out = append(out, kv{"fill bytes", w.FillBytes})
	}
	out = append(out, kv{"max in flight", strconv.Itoa(w.MaxInFlight)})
	return out
}

func sizeDist(d loadgen.SizeDist) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	add("size", d.Size)
	add("min", d.Min)
	add("max", d.Max)
	add("mean", d.Mean)
	add("stddev", d.Stddev)
	kind := orNA(d.Kind)
	if len(parts) == 0 {
		return kind
	}
	return kind + " (" + strings.Join(parts, ", ") + ")"
}

func rate(r int64) string {
	if r <= 0 {
		return "unlimited"
	}
	return strconv.FormatInt(r, 10)
}

func boolPtr(b *bool) string {
	if b == nil {
		return "default"
	}
	return strconv.FormatBool(*b)
}

func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}

// num formats a figure for the tables: 3 significant digits below 1, 2
// decimals below 100, 1 above; "n/a" for NaN and infinities.
func num(v float64) string {
	switch a := math.Abs(v); {
	case !finite(v):
		return "n/a"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v == 0:
		return "0"
	default: // small prices and latencies keep 3 significant digits
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func ratio(a, b float64) string {
	if !(b > 0) || !finite(a) || !finite(b) {
		return "n/a"
	}
	return num(100*a/b) + " %"
}

// bytesStr shows bytes as MB (10^6) with the exact count.
func bytesStr(b float64) string {
	if !finite(b) {
		return "n/a"
	}
	return num(b/1e6) + " MB (" + strconv.FormatFloat(b, 'f', 0, 64) + " B)"
}

// timeRange is [min T, max T] of the samples.
func timeRange(samples []loadgen.Sample) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range samples {
		if finite(s.T) {
			lo, hi = math.Min(lo, s.T), math.Max(hi, s.T)
		}
	}
	if lo > hi {
		return 0, 1
	}
	if hi == lo {
		hi = lo + 1
	}
	return lo, hi
}

func maxY(ss ...series) float64 {
	m := 0.0
	for _, s := range ss {
		for _, p := range s.pts {
			if finite(p.x) && finite(p.y) && p.y > m {
				m = p.y
			}
		}
	}
	return m
}

func throughputChart(samples []loadgen.Sample, hasConsume bool) chart {
	t0, t1 := timeRange(samples)
	pal := Palette["throughput"]
	mk := func(name string, get func(loadgen.Sample) float64) series {
		s := series{name: name, color: pal[name]}
		for _, smp := range samples {
			s.pts = append(s.pts, point{smp.T, get(smp)})
		}
		return s
	}
	recs := []series{mk("produce", func(s loadgen.Sample) float64 { return perSec(s, s.ProduceRecords) })}
	mbs := []series{mk("produce", func(s loadgen.Sample) float64 { return perSec(s, s.ProduceBytes) / 1e6 })}
	if hasConsume {
		recs = append(recs, mk("consume", func(s loadgen.Sample) float64 { return perSec(s, s.ConsumeRecords) }))
		mbs = append(mbs, mk("consume", func(s loadgen.Sample) float64 { return perSec(s, s.ConsumeBytes) / 1e6 }))
	}
	return chart{name: "throughput", title: "Throughput", panels: []panel{
		{title: "Throughput (records/s)", xLabel: "time (s, negative = warm-up)", yLabel: "records/s",
			x0: t0, x1: t1, y1: niceMax(maxY(recs...)), series: recs},
		{title: "Throughput (MB/s)", xLabel: "time (s, negative = warm-up)", yLabel: "MB/s (10^6 B/s)",
			x0: t0, x1: t1, y1: niceMax(maxY(mbs...)), series: mbs},
	}}
}

func latencyDistChart(h loadgen.Histogram, hasConsume bool) chart {
	pal := Palette["latency-distribution"]
	maxX := 0.0
	for _, ps := range [][]loadgen.Percentile{h.Publish, h.EndToEnd} {
		for _, p := range ps {
			if x := percentileX(p.Percentile); finite(x) && x > maxX {
				maxX = x
			}
		}
	}
	nines := int(math.Ceil(maxX - 1e-9))
	nines = max(2, min(nines, 7))
	end := float64(nines)
	mk := func(name string, ps []loadgen.Percentile) series {
		s := series{name: name, color: pal[name]}
		for _, p := range ps {
			x := percentileX(p.Percentile)
			if math.IsInf(x, 1) || x > end {
				x = end // 100% (the max) sits at the axis end
			}
			s.pts = append(s.pts, point{x, p.ValueMs})
		}
		return s
	}
	ss := []series{mk("publish", h.Publish)}
	if hasConsume || len(h.EndToEnd) > 0 {
		ss = append(ss, mk("end-to-end", h.EndToEnd))
	}
	return chart{name: "latency-distribution", title: "Latency by percentile", panels: []panel{{
		title: "Latency by percentile", xLabel: "percentile (log scale of 1/(1−p))", yLabel: "latency (ms)",
		x0: 0, x1: end, y1: niceMax(maxY(ss...)), xTicks: percentileTicks(nines), series: ss,
	}}}
}

func latencyTimeChart(samples []loadgen.Sample, hasConsume bool) chart {
	t0, t1 := timeRange(samples)
	pal := Palette["latency-over-time"]
	mk := func(name string, get func(loadgen.Sample) float64) series {
		s := series{name: name, color: pal[name]}
		for _, smp := range samples {
			y := get(smp)
			if !(y > 0) {
				y = math.NaN() // no records that second: a gap, not a zero
			}
			s.pts = append(s.pts, point{smp.T, y})
		}
		return s
	}
	ss := []series{mk("publish p99", func(s loadgen.Sample) float64 { return s.PublishP99 })}
	if hasConsume {
		ss = append(ss, mk("end-to-end p99", func(s loadgen.Sample) float64 { return s.EndToEndP99 }))
	}
	return chart{name: "latency-over-time", title: "p99 latency over time", panels: []panel{{
		title: "p99 latency per second", xLabel: "time (s, negative = warm-up)", yLabel: "p99 latency (ms)",
		x0: t0, x1: t1, y1: niceMax(maxY(ss...)), series: ss,
	}}}
}

func lagChart(samples []loadgen.Sample, hasConsume bool) chart {
	t0, t1 := timeRange(samples)
	p := panel{title: "Consumer lag", xLabel: "time (s, negative = warm-up)", yLabel: "lag (records)",
		x0: t0, x1: t1, noData: "no data: this run had no consumers"}
	if hasConsume {
		s := series{name: "lag", color: Palette["lag"]["lag"]}
		for _, smp := range samples {
			s.pts = append(s.pts, point{smp.T, float64(smp.Lag)})
		}
		p.series = []series{s}
		p.y1 = niceMax(maxY(s))
		p.noData = "no data"
	}
	return chart{name: "lag", title: "Consumer lag", panels: []panel{p}}
}

// perSec is a sample's count as a rate: the last sample of a run covers
// less than a second (Seconds); results of version 1 have no Seconds,
// every sample one second.
func perSec(s loadgen.Sample, n int64) float64 {
	if s.Seconds > 0 {
		return float64(n) / s.Seconds
	}
	return float64(n)
}

func errorsChart(r *loadgen.Result, samples []loadgen.Sample) chart {
	t0, t1 := timeRange(samples)
	pal := Palette["errors"]
	p := panel{title: "Errors per second", xLabel: "time (s, negative = warm-up)", yLabel: "errors/s",
		x0: t0, x1: t1, noData: "no data"}
	if r.Version < 2 {
		p.noData = "no data: result version " + strconv.Itoa(r.Version) + " has no per-second errors"
		return chart{name: "errors", title: "Errors", panels: []panel{p}}
	}
	mk := func(name string, get func(loadgen.Sample) int64) series {
		s := series{name: name, color: pal[name]}
		for _, smp := range samples {
			s.pts = append(s.pts, point{smp.T, perSec(smp, get(smp))})
		}
		return s
	}
	p.series = []series{
		mk("produce errors", func(s loadgen.Sample) int64 { return s.ProduceErrors }),
		mk("consume errors", func(s loadgen.Sample) int64 { return s.ConsumeErrors }),
	}
	p.y1 = niceMax(maxY(p.series...))
	return chart{name: "errors", title: "Errors", panels: []panel{p}}
}

func brokerChart(r *loadgen.Result, samples []loadgen.Sample) chart {
	t0, t1 := timeRange(samples)
	pal := Palette["broker-resources"]
	cpu := panel{title: "Broker CPU (cores)", xLabel: "time (s, negative = warm-up)", yLabel: "CPU s per s", x0: t0, x1: t1}
	mem := panel{title: "Broker resident memory (MB)", xLabel: "time (s, negative = warm-up)", yLabel: "RSS (MB)", x0: t0, x1: t1}
	if _, note := brokerKV(r); note != "" {
		note = "no data: t" + strings.TrimPrefix(note, "T")
		cpu.noData, mem.noData = note, note
		return chart{name: "broker-resources", title: "Broker CPU and memory", panels: []panel{cpu, mem}}
	}
	cs := series{name: "broker CPU", color: pal["broker CPU"]}
	ms := series{name: "broker memory", color: pal["broker memory"]}
	for _, smp := range samples {
		c, m := smp.BrokerCPUCores, smp.BrokerRSSBytes/1e6
		if !(m > 0) {
			c, m = math.NaN(), math.NaN() // not scraped that second: a gap
		}
		cs.pts = append(cs.pts, point{smp.T, c})
		ms.pts = append(ms.pts, point{smp.T, m})
	}
	cpu.series, mem.series = []series{cs}, []series{ms}
	cpu.y1, mem.y1 = niceMax(maxY(cs)), niceMax(maxY(ms))
	return chart{name: "broker-resources", title: "Broker CPU and memory", panels: []panel{cpu, mem}}
}
