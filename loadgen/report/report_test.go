package report

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/strata-io/strata/loadgen"
)

func TestWriteHTMLHasEveryChartInOrderWithItsSeries(t *testing.T) {
	doc := parse(t, render(t, realisticResult()))
	names, byName := charts(doc)
	if !slices.Equal(names, ChartNames) {
		t.Fatalf("charts %v, want %v", names, ChartNames)
	}
	wantSeries := map[string][]string{
		"throughput":           {"produce", "consume", "produce", "consume"}, // records/s and MB/s panels
		"latency-distribution": {"publish", "end-to-end"},
		"latency-over-time":    {"publish p99", "end-to-end p99"},
		"lag":                  {"lag"},
		"errors":               {"produce errors", "consume errors"},
		"broker-resources":     {"broker CPU", "broker memory"},
	}
	for name, svg := range byName {
		var got []string
		walk(svg, func(n *html.Node) {
			if s, ok := attr(n, "data-series"); ok {
				got = append(got, s)
				stroke, _ := attr(n, "stroke")
				if stroke != Palette[name][s] {
					t.Errorf("%s/%s stroke %q, want palette colour %q", name, s, stroke, Palette[name][s])
				}
				d, _ := attr(n, "d")
				if strings.Count(d, "L") < 10 {
					t.Errorf("%s/%s has only %d segments: %q", name, s, strings.Count(d, "L"), d)
				}
			}
		})
		if !slices.Equal(got, wantSeries[name]) {
			t.Errorf("%s series %v, want %v", name, got, wantSeries[name])
		}
		txt := text(svg)
		if strings.Contains(txt, "no data") {
			t.Errorf("%s says no data though the result has data", name)
		}
		for _, unit := range map[string][]string{
			"throughput":           {"records/s", "MB/s", "time (s"},
			"latency-distribution": {"latency (ms)", "percentile", "90%", "99%", "99.9%", "99.99%"},
			"latency-over-time":    {"p99 latency (ms)", "time (s"},
			"lag":                  {"lag (records)", "time (s"},
			"errors":               {"errors/s", "time (s"},
			"broker-resources":     {"CPU s per s", "RSS (MB)", "time (s"},
		}[name] {
			if !strings.Contains(txt, unit) {
				t.Errorf("%s lacks axis label %q in %q", name, unit, txt)
			}
		}
	}
}

func TestWriteHTMLPaletteIsOneColourPerSeriesAndChart(t *testing.T) {
	seen := map[string]string{}
	for _, name := range ChartNames {
		if len(Palette[name]) == 0 {
			t.Fatalf("chart %s has no palette", name)
		}
		for s, c := range Palette[name] {
			if other, dup := seen[c]; dup {
				t.Errorf("colour %s used by %s and %s/%s", c, other, name, s)
			}
			seen[c] = name + "/" + s
		}
	}
	page := render(t, realisticResult())
	for c, who := range seen {
		if !strings.Contains(page, c) {
			t.Errorf("palette colour %s (%s) is not documented in the page", c, who)
		}
	}
}

func TestWriteHTMLSummaryTableShowsTheResultsFigures(t *testing.T) {
	doc := parse(t, render(t, realisticResult()))
	rows := map[string][]string{}
	walk(byID(doc, "summary"), func(n *html.Node) {
		if n.Data != "tr" {
			return
		}
		var cells []string
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode {
				cells = append(cells, text(c))
			}
		}
		rows[cells[0]] = cells[1:]
	})
	want := map[string][]string{
		"side":       {"records", "records/s", "MB/s", "errors", "mean (ms)", "p50 (ms)", "p75 (ms)", "p90 (ms)", "p95 (ms)", "p99 (ms)", "p99.9 (ms)", "p99.99 (ms)", "max (ms)"},
		"produce":    {"1446411", "48213.7", "49.37", "3", "4.21", "3.87", "5.12", "6.54", "8.76", "12.34", "25.68", "41.02", "57.90"},
		"consume":    {"1446000", "48200.1", "49.36", "0", "", "", "", "", "", "", "", "", ""},
		"end-to-end": {"1446000", "", "", "", "6.66", "5.43", "7.65", "9.76", "12.21", "18.92", "33.33", "47.47", "88.80"},
	}
	for side, cells := range want {
		if !slices.Equal(rows[side], cells) {
			t.Errorf("summary row %q = %q, want %q", side, rows[side], cells)
		}
	}
	if len(rows) != len(want) {
		t.Errorf("summary rows %v, want exactly %d", rows, len(want))
	}
}

func TestWriteHTMLSectionsShowTheirFigures(t *testing.T) {
	r := realisticResult()
	doc := parse(t, render(t, r))
	for id, want := range map[string][]string{
		"catchup":  {"987654", "7.25 s", "139.5", "11.11", "22.22", "2.00×"},
		"cost":     {"127.0.0.1:9644/metrics", "444.0", "321.5", "12.25", "0.00223", "0.0004", "256.5", "0.875"},
		"machine":  {"812.4", "2345.6", "6.08 %", "2.10 %", "816.3"}, // 49.37/812.4, 49.36/2345.6
		"workload": {"max-throughput", "fixed (size 1KiB)", "retention.ms=600000, segment.bytes=67108864", "unlimited", "all", "5ms"},
		"errors":   {"3× NOT_LEADER_OR_FOLLOWER: the broker is not the leader"},
		"notes":    {"tiering enabled with the fs object store"},
		"environment": {"0.4.0, commit 0215303abcdef, go1.26.8", "0.4.1, commit fedcba987654", "AMD EPYC 9754, 16 cores", "64.00 GiB",
			"linux/amd64 6.18.44-test", "clusterXYZ, 1 broker(s)", "remote.log.storage.system.enable=true", "remote.storage.enable=true, segment.bytes=67108864"},
		"stability": {"40801.5", "48213.7", "55198.2", "5101.3", "0.106", "41.78", "5.22", "39950.5", "4999.9"},
		"broker":    {"127.0.0.1:9644/metrics", "35", "1.37", "2.46", "412.0 MB", "523.0 MB", "36.04"}, // 49.37 MB/s / 1.37 cores
	} {
		n := byID(doc, id)
		if n == nil {
			t.Errorf("section %q missing", id)
			continue
		}
		txt := text(n)
		for _, w := range want {
			if !strings.Contains(txt, w) {
				t.Errorf("section %q lacks %q: %q", id, w, txt)
			}
		}
	}

	r.CatchUp, r.Cost, r.Machine, r.Errors, r.Notes, r.Stability = nil, nil, nil, nil, nil, nil
	r.BrokerResources = &loadgen.BrokerResources{Reason: "no --metrics-url given: the broker's CPU and memory were not sampled"}
	doc = parse(t, render(t, r))
	for _, id := range []string{"catchup", "cost", "machine", "notes", "stability", "broker"} {
		if byID(doc, id) != nil {
			t.Errorf("section %q rendered for a result without it", id)
		}
	}
	// Missing broker figures and cost say why, in the page and in the chart.
	for id, want := range map[string]string{
		"broker-missing": "not sampled: no --metrics-url given",
		"cost-missing":   "Object-store cost not measured",
	} {
		if n := byID(doc, id); n == nil || !strings.Contains(text(n), want) {
			t.Errorf("section %q missing or lacks %q", id, want)
		}
	}
	_, byName := charts(doc)
	if txt := text(byName["broker-resources"]); !strings.Contains(txt, "no data: the broker's CPU and memory were not sampled: no --metrics-url") {
		t.Errorf("broker chart of an unsampled run: %q", txt)
	}
	if got := text(byID(doc, "errors")); got != "none" {
		t.Errorf("errors section of an error-free run = %q, want none", got)
	}
}

// TestWriteHTMLVersion1Result: a result written before version 2 renders
// with its missing figures marked n/a and the sections it lacks saying so,
// never as zeros.
func TestWriteHTMLVersion1Result(t *testing.T) {
	r := realisticResult()
	r.Version, r.Environment, r.Stability, r.BrokerResources = 1, nil, nil, nil
	r.Produce.Latency.P75, r.Produce.Latency.P95 = 0, 0
	for i := range r.Series {
		r.Series[i].Seconds, r.Series[i].ProduceErrors, r.Series[i].ConsumeErrors = 0, 0, 0
		r.Series[i].BrokerCPUCores, r.Series[i].BrokerRSSBytes = 0, 0
	}
	doc := parse(t, render(t, r))
	for id, want := range map[string]string{
		"summary":        "3.87n/a6.54n/a12.34",
		"environment":    "not recorded (result version 1)",
		"broker-missing": "result version 1 does not record them",
	} {
		if n := byID(doc, id); n == nil || !strings.Contains(text(n), want) {
			t.Errorf("%s lacks %q", id, want)
		}
	}
	_, byName := charts(doc)
	if txt := text(byName["errors"]); !strings.Contains(txt, "no data: result version 1 has no per-second errors") {
		t.Errorf("errors chart of a v1 result: %q", txt)
	}
	if txt := text(byName["throughput"]); strings.Contains(txt, "no data") {
		t.Errorf("throughput of a v1 result (one-second samples without Seconds): %q", txt)
	}
}

func TestWriteHTMLCatchUpThatNeverCaughtUpSaysSo(t *testing.T) {
	r := realisticResult()
	r.CatchUp.CaughtUpSeconds = -1
	if txt := text(byID(parse(t, render(t, r)), "catchup")); !strings.Contains(txt, "never caught up") {
		t.Errorf("catch-up section %q does not say it never caught up", txt)
	}
}

// remoteRef matches a URL that makes a browser fetch something off the
// machine: scheme-qualified or protocol-relative.
var remoteRef = regexp.MustCompile(`(?i)^\s*(https?:|//|ftp:|ws:|wss:)`)

func TestWriteHTMLReferencesNothingRemote(t *testing.T) {
	page := render(t, realisticResult())
	for _, bad := range []string{"http://", "https://", "<script", "@import", "url(", "<link", "<img", "<iframe"} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	doc := parse(t, page)
	walk(doc, func(n *html.Node) {
		for _, a := range n.Attr {
			switch strings.ToLower(a.Key) {
			case "src", "href", "xlink:href", "action", "srcset", "poster", "data":
				if remoteRef.MatchString(a.Val) {
					t.Errorf("<%s %s=%q> references a remote resource", n.Data, a.Key, a.Val)
				}
			}
		}
	})
	var csp string
	walk(doc, func(n *html.Node) {
		if v, _ := attr(n, "http-equiv"); v == "Content-Security-Policy" {
			csp, _ = attr(n, "content")
		}
	})
	if !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("no Content-Security-Policy forbidding remote loads: %q", csp)
	}
}

func TestWriteHTMLEmptyResultSaysNoDataInEveryChart(t *testing.T) {
	doc := parse(t, render(t, &loadgen.Result{}))
	names, byName := charts(doc)
	if !slices.Equal(names, ChartNames) {
		t.Fatalf("charts %v, want %v", names, ChartNames)
	}
	for name, svg := range byName {
		var notes int
		walk(svg, func(n *html.Node) {
			if c, _ := attr(n, "class"); c == "no-data" {
				notes++
				if !strings.HasPrefix(text(n), "no data") {
					t.Errorf("%s: no-data note says %q", name, text(n))
				}
			}
			if _, ok := attr(n, "data-series"); ok {
				t.Errorf("%s draws a series for an empty result", name)
			}
		})
		if notes == 0 {
			t.Errorf("%s: empty chart has no 'no data' note", name)
		}
	}
}

func TestWriteHTMLOnlyEmptySeriesSayNoData(t *testing.T) {
	// A produce-only run: throughput and publish latency have data; lag
	// has none and says why.
	r := realisticResult()
	r.Workload.Consumers = 0
	r.Consume = loadgen.Summary{}
	r.EndToEnd = loadgen.Latency{}
	r.Histogram.EndToEnd = nil
	for i := range r.Series {
		r.Series[i].ConsumeRecords, r.Series[i].ConsumeBytes, r.Series[i].EndToEndP99, r.Series[i].Lag = 0, 0, 0, 0
	}
	_, byName := charts(parse(t, render(t, r)))
	for name, svg := range byName {
		hasNote := strings.Contains(text(svg), "no data")
		if want := name == "lag"; hasNote != want {
			t.Errorf("%s: no-data note %v, want %v (text %q)", name, hasNote, want, text(svg))
		}
	}
	if txt := text(byName["lag"]); !strings.Contains(txt, "no consumers") {
		t.Errorf("lag note does not say why: %q", txt)
	}
}

func TestWriteHTMLNilIsAnError(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, nil); !errors.Is(err, ErrNoResult) {
		t.Fatalf("WriteHTML(nil) = %v, want ErrNoResult", err)
	}
	if err := WriteHTMLCompare(&b, nil); !errors.Is(err, ErrNoResult) {
		t.Fatalf("WriteHTMLCompare(nil) = %v, want ErrNoResult", err)
	}
	if err := WriteHTMLCompare(&b, []*loadgen.Result{realisticResult(), nil}); !errors.Is(err, ErrNoResult) {
		t.Fatalf("WriteHTMLCompare with a nil run = %v, want ErrNoResult", err)
	}
}

func TestWriteHTMLEscapesResultStrings(t *testing.T) {
	const evil = `<script>alert("x")</script><svg onload=alert(1)>&amp;`
	r := realisticResult()
	r.Scenario, r.Target, r.StartedAt = evil, evil, evil
	r.Brokers = []string{evil}
	r.Errors, r.Notes = []string{evil}, []string{evil}
	r.Workload.Topic, r.Workload.TopicConfigs = evil, map[string]string{evil: evil}
	r.Cost.MetricsURL = evil
	r.Environment.CPUModel, r.Environment.BrokerConfigs, r.Environment.Broker.Version = evil, map[string]string{evil: evil}, evil
	r.BrokerResources.MetricsURL = evil
	page := render(t, r)
	doc := parse(t, page)
	walk(doc, func(n *html.Node) {
		if n.Data == "script" {
			t.Errorf("a result string became a <script> element")
		}
		for _, a := range n.Attr {
			if strings.HasPrefix(a.Key, "on") {
				t.Errorf("a result string became an attribute %s on <%s>", a.Key, n.Data)
			}
		}
	})
	if names, _ := charts(doc); !slices.Equal(names, ChartNames) {
		t.Errorf("svgs %v: a result string added or broke one", names)
	}
	for _, id := range []string{"errors", "notes", "workload", "cost"} {
		if !strings.Contains(text(byID(doc, id)), evil) {
			t.Errorf("section %s does not show the string as text", id)
		}
	}
}

// TestWriteHTMLRandomResultsRenderWellFormed renders arbitrary results —
// hostile strings, NaN and infinities, negative and huge numbers, empty,
// long and unsorted series — and checks each page is well-formed, has its
// four charts, and draws only finite coordinates.
func TestWriteHTMLRandomResultsRenderWellFormed(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 2026))
	coord := regexp.MustCompile(`^(M|L| |-|\.|[0-9])*$`)
	n := 300
	if testing.Short() {
		n = 50
	}
	for i := 0; i < n; i++ {
		r := randomResult(rng)
		page := render(t, r)
		doc := parse(t, page)
		names, _ := charts(doc)
		if !slices.Equal(names, ChartNames) {
			t.Fatalf("result %d: charts %v", i, names)
		}
		walk(doc, func(n *html.Node) {
			if n.Data == "script" {
				t.Fatalf("result %d: <script> in page", i)
			}
			if n.Data == "path" {
				if d, _ := attr(n, "d"); !coord.MatchString(d) {
					t.Fatalf("result %d: path with non-numeric coordinates %q", i, d)
				}
			}
			for _, a := range n.Attr {
				if (a.Key == "x" || a.Key == "y" || a.Key == "x1" || a.Key == "y2") && (strings.Contains(a.Val, "NaN") || strings.Contains(a.Val, "Inf")) {
					t.Fatalf("result %d: <%s %s=%q>", i, n.Data, a.Key, a.Val)
				}
			}
		})
		var b bytes.Buffer
		if err := WriteHTMLCompare(&b, []*loadgen.Result{r, randomResult(rng)}); err != nil {
			t.Fatalf("result %d: compare: %v", i, err)
		}
		parse(t, b.String())
	}
}

func TestWriteHTMLCompareHasARowAndALinePerRun(t *testing.T) {
	a, b := realisticResult(), realisticResult()
	b.Target = "kfake"
	b.Produce.RecordsPerSec, b.Produce.Latency.P99 = 91234.5, 7.77
	var buf bytes.Buffer
	if err := WriteHTMLCompare(&buf, []*loadgen.Result{a, b}); err != nil {
		t.Fatal(err)
	}
	doc := parse(t, buf.String())
	txt := text(byID(doc, "compare"))
	for _, w := range []string{"1. strata", "2. kfake", "48213.7", "91234.5", "12.34", "7.77", "8.76", "0.106", "1.37", "523.0 MB", "loadgen 0.4.0 0215303abcde, broker 0.4.1 fedcba987654; AMD EPYC 9754, 16 cores"} {
		if !strings.Contains(txt, w) {
			t.Errorf("comparison table lacks %q: %q", w, txt)
		}
	}
	names, byName := charts(doc)
	if !slices.Equal(names, ChartNames) {
		t.Fatalf("charts %v, want %v", names, ChartNames)
	}
	for name, svg := range byName {
		var got []string
		walk(svg, func(n *html.Node) {
			if s, ok := attr(n, "data-series"); ok {
				got = append(got, s)
			}
		})
		if !slices.Equal(got, []string{"1. strata", "2. kfake"}) {
			t.Errorf("%s lines %v, want one per run", name, got)
		}
	}
}

func TestPercentileAxis(t *testing.T) {
	for _, c := range []struct{ p, x float64 }{{0, 0}, {90, 1}, {99, 2}, {99.9, 3}, {99.99, 4}, {50, math.Log10(2)}} {
		if got := percentileX(c.p); math.Abs(got-c.x) > 1e-9 {
			t.Errorf("percentileX(%v) = %v, want %v", c.p, got, c.x)
		}
	}
	if !math.IsInf(percentileX(100), 1) {
		t.Errorf("percentileX(100) = %v, want +Inf", percentileX(100))
	}
	var labels []string
	for _, tk := range percentileTicks(5) {
		labels = append(labels, tk.label)
	}
	if want := []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%"}; !slices.Equal(labels, want) {
		t.Errorf("ticks %v, want %v", labels, want)
	}
}

func TestNiceMaxCoversTheValueAtARoundStep(t *testing.T) {
	for _, c := range []struct{ v, want float64 }{{0, 1}, {-3, 1}, {math.NaN(), 1}, {1, 1}, {7, 8}, {48213.7, 50000}, {57.9, 60}, {0.37, 0.4}, {100, 100}} {
		if got := niceMax(c.v); math.Abs(got-c.want) > 1e-9*c.want {
			t.Errorf("niceMax(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}

func BenchmarkWriteHTML(b *testing.B) {
	r := realisticResult()
	for i := 0; i < 600; i++ { // a 10-minute run
		s := r.Series[i%len(r.Series)]
		s.T = float64(i)
		r.Series = append(r.Series, s)
	}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := WriteHTML(&buf, r); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(buf.Len()))
}

// TestPerSecUsesTheSampleLength: the last sample of a run covers a
// fraction of a second (a catch-up's consumers may read the whole backlog
// in it); its rate is its count over its length, and a version 1 sample
// (no length) is one second.
func TestPerSecUsesTheSampleLength(t *testing.T) {
	if got := perSec(loadgen.Sample{Seconds: 0.25}, 1000); got != 4000 {
		t.Errorf("1000 records in 0.25 s = %v/s, want 4000", got)
	}
	if got := perSec(loadgen.Sample{}, 1000); got != 1000 {
		t.Errorf("1000 records in a v1 sample = %v/s, want 1000", got)
	}
}
