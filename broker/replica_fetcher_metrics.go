package broker

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/storage"
)

// fetcherMetrics are the replica fetchers' timings and counters, in the
// spirit of Kafka's ReplicaFetcherManager / FetcherStats metrics. The
// fetch gap (a response's arrival to the next request) is the time in
// which a leader cannot hand this follower anything, and so adds directly
// to acks=all latency (REPLICATION.md §4.2-4.3). nil-safe.
type fetcherMetrics struct {
	request     prometheus.Histogram
	gap         prometheus.Histogram
	append      prometheus.Histogram
	bytes       prometheus.Counter
	records     prometheus.Counter
	errors      *prometheus.CounterVec
	truncations prometheus.Counter
}

func newFetcherMetrics() *fetcherMetrics {
	h := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: "replica_fetcher",
			Name: name, Help: help, Buckets: latencyBuckets})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "replica_fetcher", Name: name, Help: help})
	}
	return &fetcherMetrics{
		request: h("request_duration_seconds", "Follower Fetch round trips to the leader (long polls included)."),
		gap:     h("fetch_gap_seconds", "Time from a follower Fetch response's arrival to the next request being sent (processing and appending)."),
		append:  h("append_duration_seconds", "Local append of one partition's fetched batches (one write)."),
		bytes:   c("bytes_total", "Record-batch bytes appended as follower."),
		records: c("records_total", "Records appended as follower."),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "replica_fetcher", Name: "errors_total",
			Help: "Follower fetch errors, by Kafka error name (partition or request), TRANSPORT, CORRUPT_MESSAGE or APPEND."}, []string{"error"}),
		truncations: c("truncations_total", "Follower log truncations (diverging epoch, out of range)."),
	}
}

func (m *fetcherMetrics) cols() []prometheus.Collector {
	return []prometheus.Collector{m.request, m.gap, m.append, m.bytes, m.records, m.errors, m.truncations}
}

// Describe and Collect make the set one collector.
func (m *fetcherMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.cols() {
		c.Describe(ch)
	}
}

func (m *fetcherMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.cols() {
		c.Collect(ch)
	}
}

func (m *fetcherMetrics) observeRequest(d time.Duration) {
	if m != nil {
		m.request.Observe(d.Seconds())
	}
}

func (m *fetcherMetrics) observeGap(d time.Duration) {
	if m != nil {
		m.gap.Observe(d.Seconds())
	}
}

func (m *fetcherMetrics) appended(d time.Duration, info storage.AppendInfo) {
	if m != nil {
		m.append.Observe(d.Seconds())
		m.bytes.Add(float64(info.Bytes))
		m.records.Add(float64(info.LastOffset - info.FirstOffset + 1))
	}
}

func (m *fetcherMetrics) fetchError(name string) {
	if m != nil {
		m.errors.WithLabelValues(name).Inc()
	}
}

func (m *fetcherMetrics) truncated() {
	if m != nil {
		m.truncations.Inc()
	}
}

// replicaLagCollector exports, at scrape time, each followed partition's
// lag (leader HW - fetch offset at the last response, Kafka's
// ConsumerLag of the fetcher), the maximum (Kafka's MaxLag) and how many
// followed partitions are in each state.
type replicaLagCollector struct{ m *replicaFetchers }

var (
	replicaLagDesc = prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "replica_fetcher", "lag_records"),
		"Records the follower's fetch offset is behind the leader's high watermark, at the last response.", []string{"topic", "partition"}, nil)
	replicaMaxLagDesc = prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "replica_fetcher", "max_lag_records"),
		"The largest lag_records of this broker's followed partitions.", nil, nil)
	replicaPartsDesc = prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "replica_fetcher", "partitions"),
		"Partitions this broker follows, by fetch state (fetching, backoff, fenced, failed).", []string{"state"}, nil)
)

func (c replicaLagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- replicaLagDesc
	ch <- replicaMaxLagDesc
	ch <- replicaPartsDesc
}

func (c replicaLagCollector) Collect(ch chan<- prometheus.Metric) {
	var maxLag int64
	states := map[string]int{"fetching": 0, "backoff": 0, "fenced": 0, "failed": 0}
	now := time.Now()
	c.m.each(func(st *followState) {
		ch <- prometheus.MustNewConstMetric(replicaLagDesc, prometheus.GaugeValue, float64(st.lag), st.p.topic, strconv.Itoa(int(st.p.index)))
		maxLag = max(maxLag, st.lag)
		switch {
		case st.failed:
			states["failed"]++
		case st.fenced:
			states["fenced"]++
		case now.Before(st.delayUntil):
			states["backoff"]++
		default:
			states["fetching"]++
		}
	})
	ch <- prometheus.MustNewConstMetric(replicaMaxLagDesc, prometheus.GaugeValue, float64(maxLag))
	for s, n := range states {
		ch <- prometheus.MustNewConstMetric(replicaPartsDesc, prometheus.GaugeValue, float64(n), s)
	}
}
