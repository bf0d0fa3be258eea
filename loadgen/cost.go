package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The Strata metrics the cost accounting reads (tiering/objstore exports
// them; loadgen names them here rather than importing the server).
const (
	metricObjRequests = "strata_objstore_requests_total" // {backend,op,result}
	metricObjBytes    = "strata_objstore_bytes_total"    // {backend,op}
	metricRemoteBytes = "strata_tiering_remote_bytes"    // gauge {topic}
	metricLocalBytes  = "strata_tiering_local_bytes"     // gauge {topic}: local log of tiered partitions
	// The remote reader (tiering/api.go).
	metricRemoteReadBytes = "strata_tiering_remote_read_bytes_total"
	metricRemoteGets      = "strata_tiering_remote_gets_total"
	metricRemoteGetBytes  = "strata_tiering_remote_get_bytes_total"
	metricCacheHits       = "strata_tiering_cache_hits_total"
	metricCacheMisses     = "strata_tiering_cache_misses_total"
	metricBuildInfo       = "strata_build_info" // gauge 1 {version,commit,goversion}
	// The Prometheus client's process collector (any Go or JVM exporter
	// has them): the broker's CPU and memory over the run.
	metricCPUSeconds = "process_cpu_seconds_total"
	metricRSSBytes   = "process_resident_memory_bytes"
)

// scrape reads a Prometheus text exposition and returns every sample
// summed by name and the labels that matter here: "name" alone (summed
// over all labels), "name{op}" and "name{topic}".
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	m, _, err := scrapeWithInfo(ctx, url)
	return m, err
}

// scrapeWithInfo is scrape, and the labels of strata_build_info (nil
// when the exposition has none).
func scrapeWithInfo(ctx context.Context, url string) (map[string]float64, map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("loadgen: metrics URL %q: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("loadgen: metrics %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("loadgen: metrics %s: HTTP %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("loadgen: metrics %s: %w", url, err)
	}
	m, err := parseMetrics(bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	return m, buildInfoOf(bytes.NewReader(body)), nil
}

// buildInfoOf returns the labels of the first strata_build_info sample
// (version, commit, goversion), or nil.
func buildInfoOf(r io.Reader) map[string]string {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil
	}
	f, ok := fams[metricBuildInfo]
	if !ok || len(f.GetMetric()) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, l := range f.GetMetric()[0].GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// parseMetrics sums the counters and gauges of a text exposition: m[name]
// over every label set, m[name{op=x}] per op, m[name{topic=x}] per topic
// and m[name{backend=x}] per backend.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("loadgen: metrics: %w", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				v = m.GetUntyped().GetValue()
			default:
				continue
			}
			out[name] += v
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" || l.GetName() == "topic" || l.GetName() == "backend" {
					out[fmt.Sprintf("%s{%s=%s}", name, l.GetName(), l.GetValue())] += v
				}
			}
		}
	}
	return out, nil
}

// isStrata reports whether a scrape came from a Strata node.
func isStrata(m map[string]float64) bool {
	for k := range m {
		if strings.HasPrefix(k, "strata_") {
			return true
		}
	}
	return false
}

// costOf is the object-store activity between two scrapes, per GiB moved
// between them (produced and consumed: every phase of the run) and
// priced: PUT and LIST at the PUT-class price, GET and HEAD at the
// GET-class price (S3's request classes; DELETE is free).
func costOf(before, after map[string]float64, produced, consumed int64, o Options) *Cost {
	d := func(name, op string) float64 {
		k := fmt.Sprintf("%s{op=%s}", name, op)
		return max(after[k]-before[k], 0)
	}
	c := &Cost{
		MetricsURL:    o.MetricsURL,
		Puts:          d(metricObjRequests, "put"),
		Gets:          d(metricObjRequests, "get"),
		Lists:         d(metricObjRequests, "list"),
		Deletes:       d(metricObjRequests, "delete"),
		BytesPut:      d(metricObjBytes, "put"),
		BytesGot:      d(metricObjBytes, "get"),
		PricePerKPut:  o.PricePut,
		PricePerKGet:  o.PriceGet,
		BytesProduced: produced,
		BytesConsumed: consumed,
	}
	heads := d(metricObjRequests, "head")
	total := func(name string) float64 { return max(after[name]-before[name], 0) }
	var backends []string
	for k, v := range after {
		if b, ok := strings.CutPrefix(k, metricObjRequests+"{backend="); ok && v > before[k] {
			backends = append(backends, strings.TrimSuffix(b, "}"))
		}
	}
	slices.Sort(backends)
	c.Backend = strings.Join(backends, "+")
	c.RemoteReadBytes = total(metricRemoteReadBytes)
	c.RemoteGets = total(metricRemoteGets)
	c.RemoteGetBytes = total(metricRemoteGetBytes)
	c.CacheHits, c.CacheMisses = total(metricCacheHits), total(metricCacheMisses)
	if c.CacheHits+c.CacheMisses > 0 {
		c.CacheHitRatio = c.CacheHits / (c.CacheHits + c.CacheMisses)
	}
	const gib = 1 << 30
	if produced > 0 {
		c.PutsPerGiBIn = c.Puts / (float64(produced) / gib)
	}
	if consumed > 0 {
		c.GetsPerGiBOut = c.Gets / (float64(consumed) / gib)
	}
	if c.RemoteReadBytes > 0 {
		c.RemoteGetsPerGiBRead = c.RemoteGets / (c.RemoteReadBytes / gib)
	}
	c.EstimatedCostUSD = (c.Puts+c.Lists)/1000*o.PricePut + (c.Gets+heads)/1000*o.PriceGet
	return c
}

// metricRequestSeconds is the broker's request latency histogram {api}:
// the produce requests' time inside the node, apart from the client's.
const metricRequestSeconds = "strata_broker_request_duration_seconds"

// latencyHist is a cumulative Prometheus histogram: counts[i] requests
// took at most les[i] seconds.
type latencyHist struct {
	les, counts []float64
}

// scrapeLatency reads the histogram of name with label api=api from a
// text exposition (nil, no error, when it has none).
func scrapeLatency(ctx context.Context, url, name, api string) (*latencyHist, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("loadgen: metrics %s: HTTP %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("loadgen: metrics: %w", err)
	}
	f, ok := fams[name]
	if !ok {
		return nil, nil
	}
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if h == nil || !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "api" && l.GetValue() == api }) {
			continue
		}
		out := &latencyHist{}
		for _, b := range h.GetBucket() {
			out.les = append(out.les, b.GetUpperBound())
			out.counts = append(out.counts, float64(b.GetCumulativeCount()))
		}
		out.les = append(out.les, math.Inf(1))
		out.counts = append(out.counts, float64(h.GetSampleCount()))
		return out, nil
	}
	return nil, nil
}

// quantileBetween is the q quantile, in ms, of the requests observed
// between two scrapes of one histogram, interpolated linearly inside its
// bucket (Prometheus' histogram_quantile); 0 when there were none or the
// scrapes do not fit.
func quantileBetween(before, after *latencyHist, q float64) float64 {
	if before == nil || after == nil || len(before.les) != len(after.les) || len(after.les) == 0 {
		return 0
	}
	n := after.counts[len(after.counts)-1] - before.counts[len(before.counts)-1]
	if n <= 0 {
		return 0
	}
	rank := q * n
	lo, prev := 0.0, 0.0
	for i, le := range after.les {
		c := after.counts[i] - before.counts[i]
		if c >= rank {
			if math.IsInf(le, 1) {
				return lo * 1e3 // above the last bound: its bound, as Prometheus does
			}
			return (lo + (le-lo)*(rank-prev)/max(c-prev, 1e-9)) * 1e3
		}
		lo, prev = le, c
	}
	return lo * 1e3
}
