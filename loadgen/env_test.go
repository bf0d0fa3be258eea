package loadgen

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestRunRecordsEnvironmentStabilityAndBrokerResources: a run against a
// node with its /metrics records where it ran (machine, builds, cluster,
// replication factor, broker and topic configs), the spread of its
// per-second rates, p75 and p95, and the broker's CPU and memory sampled
// every second; the summary and the JSON carry them.
func TestRunRecordsEnvironmentStabilityAndBrokerResources(t *testing.T) {
	addr, admin := startNode(t)
	w := shortWorkload("env", 500)
	w.Duration = "4s"
	w.Compression = "lz4"
	w.TopicConfigs = map[string]string{"segment.bytes": "1048576"}
	res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Workload: w, MetricsURL: "http://" + admin + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != ResultVersion || ResultVersion < 2 {
		t.Fatalf("version %d", res.Version)
	}
	e := res.Environment
	if e == nil {
		t.Fatal("no environment")
	}
	t.Logf("environment %+v", *e)
	if e.CPUCores <= 0 || e.MemoryBytes <= 0 || e.Kernel == "" || e.CPUModel == "" || e.OS == "" {
		t.Errorf("machine not recorded: %+v", *e)
	}
	if e.Loadgen.Version == "" || e.Loadgen.Commit == "" || e.Loadgen.GoVersion == "" {
		t.Errorf("loadgen build not recorded: %+v", e.Loadgen)
	}
	if e.Broker == nil && !strings.Contains(e.BrokerBuild, "strata_build_info") {
		t.Errorf("broker build neither recorded nor explained: %q", e.BrokerBuild)
	}
	if e.Brokers != 1 || e.ReplicationFactor != 1 || e.ClusterID == "" || e.Acks != "all" || e.Compression != "lz4" {
		t.Errorf("cluster or producer settings: %+v", *e)
	}
	if e.TopicConfigs["segment.bytes"] != "1048576" || e.TopicConfigs["cleanup.policy"] == "" || e.TopicConfigs["remote.storage.enable"] == "" {
		t.Errorf("topic configs %v", e.TopicConfigs)
	}
	if len(e.BrokerConfigs) == 0 {
		t.Errorf("no broker configs (notes %v)", res.Notes)
	}

	l := res.Produce.Latency
	if !(l.P50 <= l.P75 && l.P75 <= l.P90 && l.P90 <= l.P95 && l.P95 <= l.P99 && l.P75 > 0) {
		t.Errorf("percentiles not ordered: %+v", l)
	}
	st := res.Stability
	if st == nil {
		t.Fatal("no stability")
	}
	p := st.Produce
	t.Logf("produce stability %+v, consume %+v", p, st.Consume)
	if p.Samples < 3 || p.MinRecordsPerSec > p.MeanRecordsPerSec || p.MeanRecordsPerSec > p.MaxRecordsPerSec ||
		p.StddevRecordsPerSec < 0 || p.MeanMBPerSec <= 0 {
		t.Errorf("produce stability %+v for 4 s at 500 records/s", p)
	}
	// The per-second samples describe the same run as the totals: with
	// no warm-up every acknowledgement lands in exactly one of them, and
	// a rate-limited producer never beats its target. The mean of the
	// per-second rates is not the run's rate (samples differ in length,
	// and on a loaded runner acks bunch up in the final flush), so it
	// is only held to the same order. How close the run came to 500/s
	// is the machine's business (a loaded CI runner under -race falls
	// short), not this test's.
	var sampled int64
	for _, s := range res.Series {
		sampled += s.ProduceRecords
	}
	if sampled != res.Produce.Records {
		t.Errorf("samples hold %d acknowledgements, the totals %d", sampled, res.Produce.Records)
	}
	if got := res.Produce.RecordsPerSec; got <= 0 || got > 500*1.1 ||
		p.MeanRecordsPerSec < got/2 || p.MeanRecordsPerSec > got*2 {
		t.Errorf("produce stability mean %.1f/s, run's own rate %.1f/s (target 500/s)", p.MeanRecordsPerSec, got)
	}
	if st.Consume.Samples < 3 || st.Consume.MeanRecordsPerSec <= 0 {
		t.Errorf("consume stability %+v", st.Consume)
	}

	b := res.BrokerResources
	if b == nil || !b.Sampled {
		t.Fatalf("broker resources not sampled: %+v", b)
	}
	t.Logf("broker %+v", *b)
	if b.Samples < 3 || b.RSSBytesMax <= 0 || b.CPUCoresMax <= 0 || b.CPUCoresMean <= 0 ||
		b.CPUSeconds <= 0 || b.CPUSecondsPerGBProduced <= 0 || b.CPUSecondsPerGBConsumed <= 0 {
		t.Errorf("broker resources %+v", *b)
	}
	lr := res.LoadgenResources
	if lr == nil || !(lr.CPUCoresMean > 0) || !(lr.CPUSeconds > 0) || !(lr.CPUSecondsPerGBProduced > 0) || lr.MachineCores <= 0 {
		t.Errorf("load generator's CPU %+v", lr)
	}
	withRSS := 0
	for _, s := range res.Series {
		if s.BrokerRSSBytes > 0 {
			withRSS++
		}
	}
	if withRSS < 3 {
		t.Errorf("%d samples carry the broker's memory", withRSS)
	}

	var out bytes.Buffer
	if err := WriteSummary(&out, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"environment: loadgen ", "p75 ms", "p95 ms", "stability produce:", "broker: CPU", "broker CPU: ", "loadgen: CPU ", "of the machine's "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRunWithoutMetricsSaysBrokerNotSampled: with no metrics URL the
// result says why the broker's CPU and memory are missing.
func TestRunWithoutMetricsSaysBrokerNotSampled(t *testing.T) {
	c, addr, err := StartKfake("127.0.0.1:0", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := shortWorkload("nometrics", 200)
	w.Duration, w.Consumers = "1s", 0
	res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	if b := res.BrokerResources; b == nil || b.Sampled || !strings.Contains(b.Reason, "--metrics-url") {
		t.Fatalf("broker resources %+v", b)
	}
	if e := res.Environment; e == nil || e.Broker != nil || !strings.Contains(e.BrokerBuild, "--metrics-url") {
		t.Fatalf("environment %+v", e)
	}
}

// TestRunErrorsOverTime: records the broker refuses (larger than the
// topic's max.message.bytes) are counted per second in the series, and
// the series holds every measured error.
func TestRunErrorsOverTime(t *testing.T) {
	addr, _ := startNode(t)
	w := shortWorkload("errs", 100)
	w.Duration, w.Consumers = "2s", 0
	w.TopicConfigs = map[string]string{"max.message.bytes": "100"}
	res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	var inSeries int64
	for _, s := range res.Series {
		inSeries += s.ProduceErrors
	}
	t.Logf("errors: summary %d, series %d, %v", res.Produce.Errors, inSeries, res.Errors)
	if res.Produce.Errors < 150 || inSeries < res.Produce.Errors {
		t.Fatalf("summary %d errors, series %d: want every refused record of 200 counted in both", res.Produce.Errors, inSeries)
	}
}

// TestBuildInfoFromMetrics reads strata_build_info's labels.
func TestBuildInfoFromMetrics(t *testing.T) {
	text := cannedMetrics + "# TYPE strata_build_info gauge\nstrata_build_info{commit=\"abc123\",goversion=\"go1.26\",version=\"0.4.0\"} 1\n"
	b := buildOf(buildInfoOf(strings.NewReader(text)))
	if b == nil || b.Version != "0.4.0" || b.Commit != "abc123" || b.GoVersion != "go1.26" {
		t.Fatalf("build %+v", b)
	}
	if buildInfoOf(strings.NewReader(cannedMetrics)) != nil {
		t.Fatal("build info found where there is none")
	}
}

// TestReadResultVersion1: a result written before version 2 still reads,
// summarises and compares (its new sections absent).
func TestReadResultVersion1(t *testing.T) {
	const v1 = `{"version": 1, "scenario": "fixed-rate", "target": "strata", "durationSeconds": 10,
 "produce": {"records": 1000, "recordsPerSec": 100, "mbPerSec": 0.1, "latency": {"count": 1000, "p50": 1, "p90": 2, "p99": 3, "max": 4}},
 "consume": {}, "endToEnd": {}, "series": [{"t": 0, "produceRecords": 100, "produceBytes": 100000}], "histograms": {}}`
	p := filepath.Join(t.TempDir(), "v1.json")
	if err := os.WriteFile(p, []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ReadResult(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != 1 || r.Environment != nil || r.Stability != nil || r.Series[0].Seconds != 0 {
		t.Fatalf("v1 read as %+v", r)
	}
	var out bytes.Buffer
	if err := WriteSummary(&out, r); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := Compare(&out, r, r, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "result version 1, no environment recorded") || !strings.Contains(out.String(), "publish p99 ms") {
		t.Fatalf("compare of v1 results:\n%s", out.String())
	}
}

// TestRunDefaultReplicationFactorIsTheClusters: without a replication
// factor a run's topics get the cluster's default (CreateTopics -1), and
// the result records the factor they got: three replicas on a
// three-broker cluster, not one.
func TestRunDefaultReplicationFactorIsTheClusters(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		return net.Listen(network, "127.0.0.1:0")
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	w := shortWorkload("defaultrf", 200)
	w.Duration, w.Consumers = "1s", 0
	res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	if res.Workload.ReplicationFactor != -1 || res.Environment == nil || res.Environment.ReplicationFactor != 3 {
		t.Fatalf("workload rf %d, environment %+v", res.Workload.ReplicationFactor, res.Environment)
	}
}
