package loadgen

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

const cannedMetrics = `# HELP strata_objstore_requests_total Object-store requests by operation and result.
# TYPE strata_objstore_requests_total counter
strata_objstore_requests_total{backend="s3",op="put",result="ok"} 90
strata_objstore_requests_total{backend="s3",op="put",result="error"} 10
strata_objstore_requests_total{backend="fs",op="put",result="ok"} 20
strata_objstore_requests_total{backend="s3",op="get",result="ok"} 400
strata_objstore_requests_total{backend="s3",op="list",result="ok"} 30
strata_objstore_requests_total{backend="s3",op="head",result="ok"} 100
strata_objstore_requests_total{backend="s3",op="delete",result="ok"} 5
# TYPE strata_objstore_bytes_total counter
strata_objstore_bytes_total{backend="s3",op="put"} 1.073741824e+09
strata_objstore_bytes_total{backend="s3",op="get"} 5.36870912e+08
# TYPE strata_tiering_remote_bytes gauge
strata_tiering_remote_bytes{topic="a"} 1000
strata_tiering_remote_bytes{topic="b"} 500
# TYPE strata_tiering_remote_read_bytes_total counter
strata_tiering_remote_read_bytes_total 2.147483648e+09
# TYPE strata_tiering_remote_gets_total counter
strata_tiering_remote_gets_total 512
# TYPE strata_tiering_remote_get_bytes_total counter
strata_tiering_remote_get_bytes_total 2.147483648e+09
# TYPE strata_tiering_cache_hits_total counter
strata_tiering_cache_hits_total 300
# TYPE strata_tiering_cache_misses_total counter
strata_tiering_cache_misses_total 100
# TYPE go_goroutines gauge
go_goroutines 12
`

// TestCostFromCannedMetrics: requests are summed over results and
// backends per op, bytes per op, and priced by S3 request class.
func TestCostFromCannedMetrics(t *testing.T) {
	before, err := parseMetrics(strings.NewReader("# TYPE strata_objstore_requests_total counter\nstrata_objstore_requests_total{backend=\"s3\",op=\"put\",result=\"ok\"} 20\n"))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseMetrics(strings.NewReader(cannedMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if !isStrata(after) {
		t.Fatal("strata_ metrics not recognised")
	}
	if got := after["strata_tiering_remote_bytes{topic=a}"]; got != 1000 {
		t.Fatalf("remote bytes of topic a: %v", got)
	}
	c := costOf(before, after, 2<<30, 1<<30, Options{MetricsURL: "u", PricePut: 0.005, PriceGet: 0.0004})
	if c.Puts != 100 || c.Gets != 400 || c.Lists != 30 || c.Deletes != 5 {
		t.Fatalf("requests %+v, want 100 puts (120-20), 400 gets, 30 lists, 5 deletes", c)
	}
	if c.BytesPut != 1<<30 || c.BytesGot != 1<<29 {
		t.Fatalf("bytes put %v got %v", c.BytesPut, c.BytesGot)
	}
	if c.PutsPerGiBIn != 50 || c.GetsPerGiBOut != 400 {
		t.Fatalf("per GiB: %v puts, %v gets", c.PutsPerGiBIn, c.GetsPerGiBOut)
	}
	// The remote reader's figures: 512 GETs for 2 GiB read, 3 hits a miss;
	// both backends made requests.
	if c.RemoteReadBytes != 2<<30 || c.RemoteGets != 512 || c.RemoteGetsPerGiBRead != 256 || c.CacheHitRatio != 0.75 {
		t.Fatalf("remote reader: %+v, want 2 GiB read, 512 GETs (256 per GiB), hit ratio 0.75", c)
	}
	if c.Backend != "fs+s3" {
		t.Fatalf("backend %q, want fs+s3", c.Backend)
	}
	// (100 PUT + 30 LIST)/1000 × 0.005 + (400 GET + 100 HEAD)/1000 × 0.0004
	if want := 0.13*0.005 + 0.5*0.0004; abs(c.EstimatedCostUSD-want) > 1e-12 {
		t.Fatalf("cost %v, want %v", c.EstimatedCostUSD, want)
	}
	if _, err := parseMetrics(strings.NewReader("not metrics {{{\n")); err == nil {
		t.Fatal("garbage parsed")
	}
	if isStrata(map[string]float64{"go_goroutines": 1}) {
		t.Fatal("a non-Strata exposition taken for Strata")
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// TestScrapeRealNode reads a live node's /metrics.
func TestScrapeRealNode(t *testing.T) {
	_, admin := startNode(t)
	m, err := scrape(testCtx(t), "http://"+admin+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !isStrata(m) {
		t.Fatalf("no strata_ metrics among %d", len(m))
	}
	c := costOf(m, m, 1<<30, 1<<30, Options{PricePut: 1, PriceGet: 1})
	if c.Puts != 0 || c.EstimatedCostUSD != 0 || c.Backend != "" || c.CacheHitRatio != 0 {
		t.Fatalf("no traffic between equal scrapes: %+v", c)
	}
	if _, err := scrape(testCtx(t), "http://"+admin+"/nonexistent"); err == nil {
		t.Fatal("a 404 scraped")
	}
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := CLI{Getenv: func(string) string { return "" }}.Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCLIUnreachableBrokerOneLine(t *testing.T) {
	code, _, stderr := runCLI(t, "run", "--brokers", "127.0.0.1:1", "--duration", "1s", "--quiet")
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "unreachable") {
		t.Fatalf("exit %d, stderr %q; want exit 1 and one line naming the unreachable broker", code, stderr)
	}
	code, _, stderr = runCLI(t, "run", "--brokers", "", "--duration", "1s")
	if code != 1 || !strings.Contains(stderr, "no brokers") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "run", "--brokers", "127.0.0.1:1", "--keys", "hash")
	if code != 1 || !strings.Contains(stderr, "keys") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "run", "--brokers", "127.0.0.1:1", "--html", "x.html")
	if code != 1 || !strings.Contains(stderr, "--html") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := runCLI(t, "bogus"); code != 2 {
		t.Fatalf("unknown subcommand exit %d", code)
	}
}

// TestCLIRunWritesJSONAgainstKfake runs a scenario shortcut with flag
// overrides and reads back its JSON result.
func TestCLIRunWritesJSONAgainstKfake(t *testing.T) {
	c, addr, err := StartKfake("127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := filepath.Join(t.TempDir(), "r.json")
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	code, stdout, stderr := runCLI(t, "e2e-latency", "--brokers", addr, "--rate", "300", "--duration", "2s", "--warmup", "0s",
		"--partitions", "2", "--topic", "cli", "--quiet", "--keep", "--out", out, "--cpuprofile", prof)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if b, err := os.ReadFile(prof); err != nil || len(b) < 100 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("--cpuprofile wrote %d bytes (%v), not a gzipped profile", len(b), err)
	}
	if stderr != "" {
		t.Fatalf("--quiet printed %q", stderr)
	}
	res, err := ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Scenario != "e2e-latency" || res.Workload.Rate != 300 || res.Workload.RecordSize.Size != "256B" || res.Produce.Records < 590 {
		t.Fatalf("result: scenario %s, workload %+v, produced %d", res.Scenario, res.Workload, res.Produce.Records)
	}
	if !strings.Contains(stdout, "end-to-end") {
		t.Fatalf("summary:\n%s", stdout)
	}
	if topics, groups := state(t, addr); !slices.Contains(topics, "cli") || len(groups) != 1 {
		t.Fatalf("--keep: topics %v, groups %v", topics, groups)
	}
}

func TestCLICompareRatios(t *testing.T) {
	dir := t.TempDir()
	a := &Result{Version: 1, Produce: Summary{RecordsPerSec: 1000, MBPerSec: 10, Latency: Latency{P50: 2, P99: 8, Max: 20}}}
	b := &Result{Version: 1, Produce: Summary{RecordsPerSec: 2500, MBPerSec: 25, Latency: Latency{P50: 1, P99: 2, Max: 20}}}
	for name, r := range map[string]*Result{"a.json": a, "b.json": b} {
		f, _ := os.Create(filepath.Join(dir, name))
		WriteJSON(f, r)
		f.Close()
	}
	code, out, stderr := runCLI(t, "compare", filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"produce records/s", "2.500", "publish p99 ms", "0.250", "publish p50 ms", "0.500", "publish max ms", "1.000"} {
		if !strings.Contains(out, want) {
			t.Fatalf("compare output lacks %q:\n%s", want, out)
		}
	}
	line := func(prefix string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				return l
			}
		}
		return ""
	}
	if l := line("publish p99 ms"); !strings.HasSuffix(strings.TrimSpace(l), "0.250") {
		t.Fatalf("p99 line %q, want ratio 0.250", l)
	}
	if l := line("consume MB/s"); !strings.HasSuffix(strings.TrimSpace(l), "-") {
		t.Fatalf("zero baseline line %q, want -", l)
	}
	if code, _, _ := runCLI(t, "compare", filepath.Join(dir, "a.json")); code != 2 {
		t.Fatal("compare with one file accepted")
	}
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"x":1}`), 0o644)
	if code, _, stderr := runCLI(t, "compare", filepath.Join(dir, "a.json"), filepath.Join(dir, "bad.json")); code != 1 || !strings.Contains(stderr, "not a loadgen result") {
		t.Fatalf("exit %d, %q", code, stderr)
	}
}

// TestMachine measures with 8 MiB: both figures positive, every byte
// delivered (MeasureMachine checks the reader got them all).
func TestMachine(t *testing.T) {
	m, err := MeasureMachine(context.Background(), t.TempDir(), 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	if m.SeqWriteMBPerSec <= 0 || m.LoopbackSendfileMBs <= 0 {
		t.Fatalf("%+v", m)
	}
	if _, err := MeasureMachine(context.Background(), filepath.Join(t.TempDir(), "missing"), 8<<20); err == nil {
		t.Fatal("a missing directory measured")
	}
	if _, _, err := StartKfake("0.0.0.0:0", 1); err == nil {
		t.Fatal("kfake on a non-loopback address")
	}
}

// TestCLIDefaultsLikeTheRest: --brokers defaults to 127.0.0.1:9092 as every
// other client subcommand of strata does, and compare --help says what
// compare does.
func TestCLIDefaultsLikeTheRest(t *testing.T) {
	_, _, stderr := runCLI(t, "run", "--help")
	if !strings.Contains(stderr, `(default "127.0.0.1:9092")`) {
		t.Errorf("run --help: --brokers does not default to 127.0.0.1:9092:\n%s", stderr)
	}
	var out, errb bytes.Buffer
	CLI{Getenv: func(k string) string {
		if k == "STRATA_BROKERS" {
			return "127.0.0.1:7777"
		}
		return ""
	}}.Main([]string{"run", "--help"}, &out, &errb)
	if !strings.Contains(errb.String(), `(default "127.0.0.1:7777")`) {
		t.Errorf("STRATA_BROKERS is not the default: %s", errb.String())
	}
	_, _, stderr = runCLI(t, "compare", "--help")
	if !strings.Contains(stderr, "usage: strata loadgen compare a.json b.json") || !strings.Contains(stderr, "ratio") {
		t.Errorf("compare --help does not say what compare does:\n%s", stderr)
	}
}

// TestCLIRunOverSASLAgainstKfake: --command-config's SASL (SCRAM-SHA-256,
// credentials in sasl.jaas.config) authenticates every client of a run
// against a kfake cluster that requires SASL; without it the run cannot
// reach the cluster; it and --tls-* are exclusive.
func TestCLIRunOverSASLAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "lg", "lg-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	cc := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(cc, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="lg" password="lg-secret";`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "r.json")
	code, _, stderr := runCLI(t, "e2e-latency", "--brokers", addr, "--command-config", cc, "--rate", "200", "--duration", "1s", "--warmup", "0s",
		"--partitions", "1", "--topic", "sasl", "--quiet", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	res, err := ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Produce.Records < 150 || res.Consume.Records < 150 {
		t.Fatalf("produced %d consumed %d over SASL", res.Produce.Records, res.Consume.Records)
	}
	if code, _, stderr := runCLI(t, "e2e-latency", "--brokers", addr, "--rate", "10", "--duration", "1s", "--warmup", "0s", "--quiet"); code == 0 {
		t.Fatalf("a run without SASL against a SASL cluster exited 0: %s", stderr)
	}
	if code, _, stderr := runCLI(t, "e2e-latency", "--brokers", addr, "--command-config", cc, "--tls-ca", cc, "--quiet"); code == 0 || !strings.Contains(stderr, "not both") {
		t.Fatalf("--command-config with --tls-ca: exit %d %s", code, stderr)
	}
}
