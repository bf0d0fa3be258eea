package loadgen

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// catchUpWorkload is a small catch-up run: a 20 MiB local backlog of
// 1 KiB records, producers at 2,000 records/s alone for 2 s, then two
// consumers (one group) from the earliest offset.
func catchUpWorkload(topic string) Workload {
	w := shortWorkload(topic, 2000)
	w.Scenario = "catch-up"
	w.FillBytes = "20MiB"
	w.RecordSize = SizeDist{Kind: "fixed", Size: "1KiB"}
	w.Consumers = 2
	w.Warmup, w.Baseline, w.Duration, w.RemoteWait = "1s", "2s", "40s", "1s"
	return w
}

// TestCatchUpSeriesShowsWhatTheConsumersRead: the per-second series of a
// catch-up holds every record the consumers read, and its lag falls to the
// caught-up threshold at the end. The consumers of a fresh group wait for
// the group's initial rebalance delay, then read the local backlog in a
// fraction of a second: the sampler stopped at "caught up" without a
// sample of that fraction, so every consume sample was 0 and the lag
// series only climbed.
func TestCatchUpSeriesShowsWhatTheConsumersRead(t *testing.T) {
	addr, admin := startNode(t)
	res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Workload: catchUpWorkload("cu"), MetricsURL: "http://" + admin + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	c := res.CatchUp
	t.Logf("catch-up %+v, consumed %d, notes %v", *c, res.Consume.Records, res.Notes)
	if c.CaughtUpSeconds < 0 {
		t.Fatal("never caught up")
	}
	if c.BrokerProduceP99Before <= 0 || c.BrokerProduceP99During <= 0 {
		t.Fatalf("broker-side produce p99 %v ms alone, %v ms during: want both measured", c.BrokerProduceP99Before, c.BrokerProduceP99During)
	}
	if res.Consume.Records < c.BacklogRecords {
		t.Fatalf("consumed %d records, backlog %d", res.Consume.Records, c.BacklogRecords)
	}
	var inSeries, maxLag int64
	for _, s := range res.Series {
		inSeries += s.ConsumeRecords
		maxLag = max(maxLag, s.Lag)
	}
	if inSeries < res.Consume.Records {
		t.Fatalf("the series holds %d consumed records, the summary %d", inSeries, res.Consume.Records)
	}
	last := res.Series[len(res.Series)-1]
	if threshold := int64(2000 / 10); last.Lag > threshold || maxLag < c.BacklogRecords {
		t.Fatalf("lag series ends at %d (max %d, backlog %d): want it to fall to <= %d", last.Lag, maxLag, c.BacklogRecords, threshold)
	}
	checkCatchUpDetail(t, res)
}

// checkCatchUpDetail: every sample says the interval it covers, and the
// consumers' first record comes before catching up.
func checkCatchUpDetail(t *testing.T, res *Result) {
	t.Helper()
	for _, s := range res.Series {
		if s.Seconds <= 0 || s.Seconds > 1.5 {
			t.Errorf("sample at t=%v covers %v s", s.T, s.Seconds)
		}
	}
	c := res.CatchUp
	if c.FirstRecordSeconds <= 0 || c.FirstRecordSeconds > c.CaughtUpSeconds {
		t.Fatalf("first record after %v s, caught up after %v s", c.FirstRecordSeconds, c.CaughtUpSeconds)
	}
	if c.ReadMBPerSecFirst < c.ReadMBPerSec {
		t.Fatalf("read %v MB/s from the first record, %v MB/s from the consumers' start", c.ReadMBPerSecFirst, c.ReadMBPerSec)
	}
}

// TestStabilityCountsFromTheFirstRecord: the consume side's spread starts
// at its first sample with records (consumers joining their group are
// not reading slowly), and keeps a partial last sample of a quarter
// second or more.
func TestStabilityCountsFromTheFirstRecord(t *testing.T) {
	var series []Sample
	for i := 1; i <= 6; i++ {
		s := Sample{T: float64(i), Seconds: 1, ProduceRecords: 1000, ProduceBytes: 1e6}
		if i >= 4 {
			s.ConsumeRecords, s.ConsumeBytes = 3000, 3e6
		}
		series = append(series, s)
	}
	series = append(series, Sample{T: 6.5, Seconds: 0.5, ProduceRecords: 500, ProduceBytes: 5e5, ConsumeRecords: 2000, ConsumeBytes: 2e6},
		Sample{T: 6.6, Seconds: 0.1, ProduceRecords: 1})
	st := stabilityOf(series, 6.6, 1)
	if c := st.Consume; c.Samples != 4 || c.MinRecordsPerSec != 3000 || c.MaxRecordsPerSec != 4000 || c.MeanRecordsPerSec != 3250 {
		t.Errorf("consume %+v: want the 3 full seconds from the first record and the half second at 4000/s", c)
	}
	if p := st.Produce; p.Samples != 7 || p.MinRecordsPerSec != 1000 || p.StddevRecordsPerSec != 0 || p.CV != 0 {
		t.Errorf("produce %+v: want 6 full seconds and the half second at 1000/s (T=1 covers (0,1]; the 0.1 s one left out)", p)
	}
}

// TestStabilityClipsTheProduceSampleAtTheLastAck: the measured phase ends
// at the last acknowledgement, so the produce sample that straddles the
// end counts over its part inside; the consume side (which reads on past
// it) still leaves that sample out, and one with less than a quarter
// second inside is left out on both.
func TestStabilityClipsTheProduceSampleAtTheLastAck(t *testing.T) {
	series := []Sample{
		{T: 1, Seconds: 1, ProduceRecords: 400, ConsumeRecords: 400},
		{T: 2, Seconds: 1, ProduceRecords: 400, ConsumeRecords: 400},
		{T: 3, Seconds: 1, ProduceRecords: 300, ConsumeRecords: 400}, // acks bunch up in the flush:
		{T: 4, Seconds: 1, ProduceRecords: 250, ConsumeRecords: 500}, // measured ends at 3.5
	}
	st := stabilityOf(series, 3.5, 0)
	if p := st.Produce; p.Samples != 4 || p.MaxRecordsPerSec != 500 || p.MeanRecordsPerSec != 400 {
		t.Errorf("produce %+v: want 400, 400, 300 and 250 over the half second inside (500/s)", p)
	}
	if c := st.Consume; c.Samples != 3 || c.MeanRecordsPerSec != 400 {
		t.Errorf("consume %+v: want the 3 samples inside", c)
	}
	if p := stabilityOf(series, 3.2, 0).Produce; p.Samples != 3 {
		t.Errorf("produce %+v: 0.2 s inside is too short to count", p)
	}
}

// TestLoadgenResourcesOverTheMeasuredPhase: the load generator's CPU is
// the mean of the measured phase's samples that carry it (warm-up and
// samples without a figure left out), times the phase, per GB produced.
func TestLoadgenResourcesOverTheMeasuredPhase(t *testing.T) {
	series := []Sample{
		{T: -0.5, Seconds: 1, LoadgenCPUCores: 1.9}, // straddles the warm-up's end
		{T: 1, Seconds: 1, LoadgenCPUCores: 1.2},
		{T: 2, Seconds: 1},
		{T: 3, Seconds: 1, LoadgenCPUCores: 0.8},
		{T: 4.5, Seconds: 1, LoadgenCPUCores: 1.9}, // after the phase
	}
	l := loadgenResources(series, 3, 2e9)
	if l == nil || l.CPUCoresMean != 1 || l.CPUSeconds != 3 || l.CPUSecondsPerGBProduced != 1.5 || l.MachineCores <= 0 {
		t.Fatalf("%+v: want 1 core mean, 3 CPU-s, 1.5 per GB", l)
	}
	if l := loadgenResources(series[2:3], 3, 2e9); l != nil {
		t.Fatalf("%+v from samples without a figure", l)
	}
}

// TestWaitRemoteWaitsForLocalRetention: a backlog that has tiered but is
// still on the local disk would be read locally, so the wait goes on
// until the node's local bytes fall to half the backlog too.
func TestWaitRemoteWaitsForLocalRetention(t *testing.T) {
	var scrapes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		local := 100e6 // tiered, not yet deleted locally
		if scrapes.Add(1) >= 3 {
			local = 8e6
		}
		fmt.Fprintf(w, "# TYPE %s gauge\n%s{topic=\"t\"} 90e6\n# TYPE %s gauge\n%s{topic=\"t\"} %g\n",
			metricRemoteBytes, metricRemoteBytes, metricLocalBytes, metricLocalBytes, local)
	}))
	t.Cleanup(srv.Close)
	r := &runner{o: Options{MetricsURL: srv.URL}, w: Workload{RemoteWait: "20s"}, topics: []string{"t"}, res: &Result{}}
	r.waitRemote(testCtx(t), 100e6)
	if n := scrapes.Load(); n != 3 {
		t.Fatalf("waited for %d scrapes, want 3 (until local retention acted)", n)
	}
	if len(r.res.Notes) != 1 || !strings.Contains(r.res.Notes[0], "remote tier holds 90.0 MB of the backlog, 8.0 MB local") {
		t.Fatalf("notes %q", r.res.Notes)
	}
}

// TestQuantileBetweenScrapes: the p99 of the requests between two scrapes
// of the broker's latency histogram, interpolated in its bucket as
// Prometheus' histogram_quantile does.
func TestQuantileBetweenScrapes(t *testing.T) {
	const body = `# TYPE strata_broker_request_duration_seconds histogram
strata_broker_request_duration_seconds_bucket{api="Produce",le="0.001"} %d
strata_broker_request_duration_seconds_bucket{api="Produce",le="0.01"} %d
strata_broker_request_duration_seconds_bucket{api="Produce",le="0.1"} %d
strata_broker_request_duration_seconds_bucket{api="Produce",le="+Inf"} %d
strata_broker_request_duration_seconds_sum{api="Produce"} 1
strata_broker_request_duration_seconds_count{api="Produce"} %d
strata_broker_request_duration_seconds_bucket{api="Fetch",le="0.001"} 0
strata_broker_request_duration_seconds_bucket{api="Fetch",le="0.01"} 0
strata_broker_request_duration_seconds_bucket{api="Fetch",le="0.1"} 0
strata_broker_request_duration_seconds_bucket{api="Fetch",le="+Inf"} 99999
strata_broker_request_duration_seconds_sum{api="Fetch"} 1
strata_broker_request_duration_seconds_count{api="Fetch"} 99999
`
	var counts atomic.Pointer[[4]int]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c := counts.Load()
		fmt.Fprintf(w, body, c[0], c[1], c[2], c[3], c[3])
	}))
	t.Cleanup(srv.Close)
	scrapeAt := func(c [4]int) *latencyHist {
		counts.Store(&c)
		h, err := scrapeLatency(testCtx(t), srv.URL, metricRequestSeconds, "Produce")
		if err != nil || h == nil {
			t.Fatalf("scrape: %v, %v", h, err)
		}
		return h
	}
	a := scrapeAt([4]int{500, 600, 600, 600})
	// Then 1000 more: 900 under 1 ms, 80 in (1, 10] ms, 20 in (10, 100].
	b := scrapeAt([4]int{1400, 1580, 1600, 1600})
	// Rank 990: 980 are at most 10 ms, so 10 into the (10, 100] ms
	// bucket's 20 → 10 + 90 × 10/20 ms; the p90 (rank 900) is the 1 ms
	// bucket's bound.
	if got, want := quantileBetween(a, b, 0.99), 10+90*10.0/20; abs(got-want) > 1e-9 {
		t.Errorf("p99 %v ms, want %v", got, want)
	}
	if got, want := quantileBetween(a, b, 0.9), 1.0; abs(got-want) > 1e-9 {
		t.Errorf("p90 %v ms, want %v", got, want)
	}
	if got := quantileBetween(b, b, 0.99); got != 0 {
		t.Errorf("no requests between the scrapes: p99 %v, want 0", got)
	}
	if got := quantileBetween(nil, b, 0.99); got != 0 {
		t.Errorf("a failed scrape: p99 %v, want 0", got)
	}
}
