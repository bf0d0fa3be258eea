package report

import (
	"bytes"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/strata-io/strata/loadgen"
)

// realisticResult is a run as loadgen would report it: 5 s of warm-up and
// 30 s measured, consumers on, a catch-up phase, cost and machine limits.
// The figures are distinctive so tests can find them in the page.
func realisticResult() *loadgen.Result {
	t, f := true, false
	r := &loadgen.Result{
		Version:  loadgen.ResultVersion,
		Scenario: "max-throughput",
		Workload: loadgen.Workload{
			Name: "max-throughput", Topic: "bench", Topics: 1, Partitions: 6, ReplicationFactor: 1,
			CreateTopics: &t, TopicConfigs: map[string]string{"segment.bytes": "67108864", "retention.ms": "600000"},
			RecordSize: loadgen.SizeDist{Kind: "fixed", Size: "1KiB"}, Keys: "none", KeySpace: 10000, ZipfS: 1.1,
			Compression: "none", Acks: "all", Linger: "5ms", BatchBytes: "1MiB", Idempotent: &f,
			Producers: 2, Consumers: 2, Groups: 1, ConsumeFrom: "latest", Duration: "30s", Warmup: "5s", MaxInFlight: 5,
		},
		Brokers:   []string{"127.0.0.1:9092"},
		Target:    "strata",
		StartedAt: "2026-11-29T13:00:00Z",
		Duration:  30,
		Produce: loadgen.Summary{Records: 1446411, Bytes: 1481124864, Errors: 3, RecordsPerSec: 48213.7, MBPerSec: 49.37,
			Latency: loadgen.Latency{Count: 1446411, Mean: 4.21, P50: 3.87, P75: 5.12, P90: 6.54, P95: 8.76, P99: 12.34, P999: 25.68, P9999: 41.02, Max: 57.9}},
		Consume:  loadgen.Summary{Records: 1446000, Bytes: 1480704000, RecordsPerSec: 48200.1, MBPerSec: 49.36},
		EndToEnd: loadgen.Latency{Count: 1446000, Mean: 6.66, P50: 5.43, P75: 7.65, P90: 9.76, P95: 12.21, P99: 18.92, P999: 33.33, P9999: 47.47, Max: 88.8},
		CatchUp: &loadgen.CatchUp{BacklogRecords: 987654, BacklogBytes: 1011357696, CaughtUpSeconds: 7.25, ReadMBPerSec: 139.5,
			ProducerP99Before: 11.11, ProducerP99During: 22.22, ProducerP99Increase: 2},
		Cost: &loadgen.Cost{MetricsURL: "127.0.0.1:9644/metrics", Puts: 444, Gets: 17, Lists: 3, Deletes: 5,
			BytesPut: 1.48e9, BytesGot: 2.1e7, PutsPerGiBIn: 321.5, GetsPerGiBOut: 12.25, PricePerKPut: 0.005, PricePerKGet: 0.0004,
			EstimatedCostUSD: 0.002227, RemoteReadBytes: 1.07e9, RemoteGetsPerGiBRead: 256.5, CacheHitRatio: 0.875},
		Machine: &loadgen.Machine{SeqWriteMBPerSec: 812.4, LoopbackSendfileMBs: 2345.6, S3Get: &loadgen.S3Get{MBPerSec: 816.3}},
		Errors:  []string{"3× NOT_LEADER_OR_FOLLOWER: the broker is not the leader"},
		Notes:   []string{"tiering enabled with the fs object store"},
		Environment: &loadgen.Environment{
			Loadgen: loadgen.Build{Version: "0.4.0", Commit: "0215303abcdef", GoVersion: "go1.26.8"},
			Broker:  &loadgen.Build{Version: "0.4.1", Commit: "fedcba987654", GoVersion: "go1.26.7"},
			OS:      "linux", Arch: "amd64", Kernel: "6.18.44-test", CPUModel: "AMD EPYC 9754", CPUCores: 16,
			MemoryBytes: 64 << 30, Hostname: "bench-1", ClusterID: "clusterXYZ", Brokers: 1, ReplicationFactor: 1,
			Acks: "all", Compression: "none",
			BrokerConfigs: map[string]string{"remote.log.storage.system.enable": "true", "log.segment.bytes": "1073741824"},
			TopicConfigs:  map[string]string{"remote.storage.enable": "true", "segment.bytes": "67108864"},
		},
		Stability: &loadgen.Stability{
			Produce: loadgen.Rates{Samples: 30, MinRecordsPerSec: 40801.5, MeanRecordsPerSec: 48213.7, MaxRecordsPerSec: 55198.2, StddevRecordsPerSec: 5101.3, CV: 0.1058,
				MinMBPerSec: 41.78, MeanMBPerSec: 49.37, MaxMBPerSec: 56.52, StddevMBPerSec: 5.22},
			Consume: loadgen.Rates{Samples: 30, MinRecordsPerSec: 39950.5, MeanRecordsPerSec: 48200.1, MaxRecordsPerSec: 54050.5, StddevRecordsPerSec: 4999.9, CV: 0.1037,
				MinMBPerSec: 40.91, MeanMBPerSec: 49.36, MaxMBPerSec: 55.35, StddevMBPerSec: 5.12},
		},
		BrokerResources: &loadgen.BrokerResources{MetricsURL: "127.0.0.1:9644/metrics", Sampled: true, Samples: 35,
			CPUCoresMean: 1.37, CPUCoresMax: 2.46, RSSBytesMean: 412e6, RSSBytesMax: 523e6},
	}
	for i := -5; i < 30; i++ {
		x := float64(i)
		w := 1 + 0.15*math.Sin(x/3)
		s := loadgen.Sample{
			T:              x,
			ProduceRecords: int64(48000 * w),
			ProduceBytes:   int64(48000 * w * 1024),
			ConsumeRecords: int64(47000 * (1 + 0.15*math.Sin((x-1)/3))),
			PublishP99:     12 + 4*math.Cos(x/2),
			EndToEndP99:    19 + 6*math.Sin(x/4),
			Lag:            int64(2000 + 1500*math.Sin(x/5)),
			Seconds:        1,
			BrokerCPUCores: 1.3 + 0.5*math.Sin(x/4),
			BrokerRSSBytes: 400e6 + 3e6*(x+5),
		}
		if i%7 == 3 {
			s.ProduceErrors = 1
		}
		if i%11 == 5 {
			s.ConsumeErrors = 2
		}
		s.ConsumeBytes = s.ConsumeRecords * 1024
		r.Series = append(r.Series, s)
	}
	r.Histogram.Publish = hdrPercentiles(3.87, 57.9)
	r.Histogram.EndToEnd = hdrPercentiles(5.43, 88.8)
	return r
}

// hdrPercentiles imitates HdrHistogram's percentile iteration (5 ticks per
// half distance): points crowd toward 100 and end at 100 with the max.
func hdrPercentiles(median, maxV float64) []loadgen.Percentile {
	var out []loadgen.Percentile
	for p := 0.0; p < 99.999; {
		v := median * (0.3 + 0.7*math.Pow(1+percentileX(p), 1.6)*(p/50))
		v = math.Min(v, maxV)
		out = append(out, loadgen.Percentile{Percentile: p, ValueMs: v, Count: int64(p * 1000)})
		half := (100 - p) / 2
		p += half / 5
	}
	return append(out, loadgen.Percentile{Percentile: 100, ValueMs: maxV, Count: 1446411})
}

func render(t testing.TB, r *loadgen.Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	return b.String()
}

// parse parses page and fails the test if it is not well-formed: every
// non-void element closed in order (the report closes all of its
// elements explicitly, so any imbalance is a bug, for example an
// unescaped "<" from a result string).
func parse(t testing.TB, page string) *html.Node {
	t.Helper()
	checkBalanced(t, page)
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("html.Parse: %v", err)
	}
	return doc
}

var voidElements = map[string]bool{"meta": true, "br": true, "img": true, "hr": true, "link": true, "input": true}

func checkBalanced(t testing.TB, page string) {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(page))
	var stack []string
	for {
		switch z.Next() {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				t.Fatalf("tokenizer: %v", z.Err())
			}
			if len(stack) != 0 {
				t.Fatalf("unclosed elements at end: %v", stack)
			}
			return
		case html.StartTagToken:
			name, _ := z.TagName()
			if !voidElements[string(name)] {
				stack = append(stack, string(name))
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			if len(stack) == 0 || stack[len(stack)-1] != string(name) {
				t.Fatalf("end tag </%s> does not close the open element (stack %v)", name, stack)
			}
			stack = stack[:len(stack)-1]
		}
	}
}

// walk calls fn on every element node.
func walk(n *html.Node, fn func(*html.Node)) {
	if n.Type == html.ElementNode {
		fn(n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func text(n *html.Node) string {
	var b strings.Builder
	var rec func(*html.Node)
	rec = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			rec(c)
		}
	}
	rec(n)
	return b.String()
}

// byID returns the element with id, or nil.
func byID(doc *html.Node, id string) *html.Node {
	var found *html.Node
	walk(doc, func(n *html.Node) {
		if v, ok := attr(n, "id"); ok && v == id && found == nil {
			found = n
		}
	})
	return found
}

// charts returns the page's <svg> elements by data-chart, in page order.
func charts(doc *html.Node) (names []string, byName map[string]*html.Node) {
	byName = map[string]*html.Node{}
	walk(doc, func(n *html.Node) {
		if n.Data == "svg" {
			name, _ := attr(n, "data-chart")
			names = append(names, name)
			byName[name] = n
		}
	})
	return names, byName
}

// randomResult builds an arbitrary Result: hostile strings, NaN and
// infinite numbers, negative values, empty and long series, unsorted times.
func randomResult(rng *rand.Rand) *loadgen.Result {
	str := func() string {
		pieces := []string{"<script>alert(1)</script>", "</svg>", "&amp;", "\"'", "<!--", "]]>", "ü✓", "\x00", "javascript:x", "{{.}}", "", "plain", "</td></tr></table>"}
		var b strings.Builder
		for i := rng.IntN(4); i >= 0; i-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	fl := func() float64 {
		switch rng.IntN(8) {
		case 0:
			return math.NaN()
		case 1:
			return math.Inf(1 - 2*rng.IntN(2))
		case 2:
			return -rng.Float64() * 1e6
		case 3:
			return 0
		case 4:
			return rng.Float64() * 1e18
		default:
			return rng.Float64() * 1000
		}
	}
	lat := func() loadgen.Latency {
		return loadgen.Latency{Count: rng.Int64(), Mean: fl(), P50: fl(), P90: fl(), P99: fl(), P999: fl(), P9999: fl(), Max: fl()}
	}
	sum := func() loadgen.Summary {
		return loadgen.Summary{Records: rng.Int64() - rng.Int64(), Bytes: rng.Int64(), Errors: rng.Int64N(10), RecordsPerSec: fl(), MBPerSec: fl(), Latency: lat()}
	}
	pcts := func() []loadgen.Percentile {
		var ps []loadgen.Percentile
		for i := rng.IntN(50); i > 0; i-- {
			p := []float64{rng.Float64() * 100, 100, 0, -5, 150, math.NaN(), 99.9999999999}[rng.IntN(7)]
			ps = append(ps, loadgen.Percentile{Percentile: p, ValueMs: fl(), Count: rng.Int64()})
		}
		return ps
	}
	r := &loadgen.Result{
		Version: rng.IntN(3), Scenario: str(), Target: str(), StartedAt: str(), Duration: fl(),
		Brokers: []string{str(), str()}, Produce: sum(), Consume: sum(), EndToEnd: lat(),
		Workload: loadgen.Workload{Name: str(), Topic: str(), Partitions: rng.IntN(100) - 5, Consumers: rng.IntN(3),
			TopicConfigs: map[string]string{str(): str()}, RecordSize: loadgen.SizeDist{Kind: str(), Size: str()},
			Compression: str(), Rate: rng.Int64N(1e6) - 100, FillBytes: str()},
		Errors: []string{str(), str()}, Notes: []string{str()},
	}
	for i := rng.IntN(200); i > 0; i-- {
		r.Series = append(r.Series, loadgen.Sample{T: fl(), ProduceRecords: rng.Int64N(1e9), ProduceBytes: rng.Int64() - rng.Int64(),
			ConsumeRecords: rng.Int64N(1e6), ConsumeBytes: rng.Int64N(1e12), PublishP99: fl(), EndToEndP99: fl(), Lag: rng.Int64() - rng.Int64()})
	}
	r.Histogram = loadgen.Histogram{Publish: pcts(), EndToEnd: pcts()}
	if rng.IntN(2) == 0 {
		r.CatchUp = &loadgen.CatchUp{BacklogRecords: rng.Int64(), CaughtUpSeconds: fl(), ReadMBPerSec: fl(), ProducerP99Increase: fl()}
	}
	if rng.IntN(2) == 0 {
		r.Cost = &loadgen.Cost{MetricsURL: str(), Puts: fl(), BytesPut: fl(), EstimatedCostUSD: fl()}
	}
	if rng.IntN(2) == 0 {
		r.Machine = &loadgen.Machine{SeqWriteMBPerSec: fl(), LoopbackSendfileMBs: fl()}
	}
	return r
}
