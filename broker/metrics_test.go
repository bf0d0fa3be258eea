package broker

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/storage"
)

// instrumentRequest is everything the request path records for one
// produce and one fetch: the response's top-level error code, the request
// count and latency, bytes and messages in, bytes out.
func instrumentRequest(m *metrics, tm *topicMetrics, produce *kmsg.ProduceResponse, fetch *kmsg.FetchResponse, start time.Time) {
	info := storage.AppendInfo{FirstOffset: 10, LastOffset: 19, Bytes: 1024}
	m.observeRequest(0, 9, m.responseErrorCode(0, produce), start)
	tm.appended(info)
	m.observeRequest(1, 12, m.responseErrorCode(1, fetch), start)
	tm.sent(1024)
}

func TestMetricsRequestPathDoesNotAllocate(t *testing.T) {
	m := newMetrics()
	tm := m.topic("t")
	produce, fetch := kmsg.NewPtrProduceResponse(), kmsg.NewPtrFetchResponse()
	start := time.Now()
	if a := testing.AllocsPerRun(1000, func() { instrumentRequest(m, tm, produce, fetch, start) }); a != 0 {
		t.Fatalf("%v allocations per instrumented produce+fetch, want 0", a)
	}
	if got := counterValue(t, m.messagesIn.WithLabelValues("t")); got != 10*1001 {
		t.Fatalf("messages in %v, want %v", got, 10*1001)
	}
	if got := counterValue(t, m.requests.WithLabelValues("Produce", "9", errNone)); got != 1001 {
		t.Fatalf("produce requests %v", got)
	}
}

func TestMetricsTopLevelErrorCodeIsReadFromTheResponse(t *testing.T) {
	m := newMetrics()
	fetch := kmsg.NewPtrFetchResponse()
	fetch.ErrorCode = kerr.FetchSessionIDNotFound.Code
	if got := m.responseErrorCode(1, fetch); got != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("fetch top-level code %d", got)
	}
	// Produce has no top-level error code: its errors are per partition.
	if got := m.responseErrorCode(0, kmsg.NewPtrProduceResponse()); got != 0 {
		t.Fatalf("produce top-level code %d", got)
	}
	m.observeRequest(1, 12, fetch.ErrorCode, time.Now())
	if got := counterValue(t, m.requests.WithLabelValues("Fetch", "12", "FETCH_SESSION_ID_NOT_FOUND")); got != 1 {
		t.Fatalf("fetch errors counted %v", got)
	}
	// An unsupported version never mints a series of its own.
	m.observeRequest(18, 31000, kerr.UnsupportedVersion.Code, time.Now())
	if got := counterValue(t, m.requests.WithLabelValues("ApiVersions", "unsupported", "UNSUPPORTED_VERSION")); got != 1 {
		t.Fatalf("unsupported version counted %v", got)
	}
}

func TestMetricsTopicSeriesLiveWhileAPartitionHoldsThem(t *testing.T) {
	m := newMetrics()
	a, b := m.topic("t"), m.topic("t")
	if a != b {
		t.Fatal("two partitions of one topic got different counters")
	}
	a.sent(5)
	m.releaseTopic("t")
	if got := seriesCount(m.bytesOut); got != 1 {
		t.Fatalf("%d series after releasing one of two partitions", got)
	}
	m.releaseTopic("t")
	if got := seriesCount(m.bytesOut); got != 0 {
		t.Fatalf("%d series after releasing the last partition", got)
	}
	// A node's metrics register once per registry, with the Go and
	// process collectors tolerated when the registry has them already.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	if err := newMetrics().register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})); err != nil {
		t.Fatal(err)
	}
}

// counterValue reads a counter's value.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// seriesCount counts the series a collector exports.
func seriesCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

// BenchmarkRequestInstrumentation measures what metrics cost per request
// pair (one produce, one fetch): a few atomic adds, no allocation.
func BenchmarkRequestInstrumentation(b *testing.B) {
	m := newMetrics()
	tm := m.topic("t")
	produce, fetch := kmsg.NewPtrProduceResponse(), kmsg.NewPtrFetchResponse()
	start := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		instrumentRequest(m, tm, produce, fetch, start)
	}
}
