package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/loadgen"
	"github.com/strata-io/strata/loadgen/report"
)

func writeJSON(t *testing.T, dir, name string, r *loadgen.Result) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func result(target string, mbs, p99, e2e99 float64) *loadgen.Result {
	return &loadgen.Result{
		Version: 1, Scenario: "max-throughput", Target: target, Duration: 20,
		Workload: loadgen.Workload{Partitions: 12, RecordSize: loadgen.SizeDist{Kind: "fixed", Size: "1KiB"},
			Compression: "none", Acks: "all", Producers: 2, Consumers: 2, Duration: "20s", Warmup: "3s"},
		Produce:  loadgen.Summary{RecordsPerSec: mbs * 1000, MBPerSec: mbs, Bytes: 2 << 30, Latency: loadgen.Latency{P50: p99 / 4, P99: p99, P999: p99 * 2}},
		Consume:  loadgen.Summary{MBPerSec: mbs - 1},
		EndToEnd: loadgen.Latency{P50: e2e99 / 3, P99: e2e99, P999: e2e99 * 2},
	}
}

// cannedDir is a result directory as bench/run leaves it: two machine
// measurements, three Strata and two kfake max-throughput runs, a
// Strata-only catch-up run with cost, and failures.
func cannedDir(t *testing.T) string {
	dir := t.TempDir()
	writeJSON(t, dir, "machine.1.json", &loadgen.Result{Version: 1, Scenario: "machine", Machine: &loadgen.Machine{SeqWriteMBPerSec: 800, LoopbackSendfileMBs: 3000}})
	writeJSON(t, dir, "machine.2.json", &loadgen.Result{Version: 1, Scenario: "machine", Machine: &loadgen.Machine{SeqWriteMBPerSec: 900, LoopbackSendfileMBs: 5000}})
	r1, r2 := result("strata", 40, 30, 50), result("strata", 50, 10, 70)
	r1.Produce.Errors, r2.Consume.Errors = 2, 4
	r1.Errors, r2.Errors = []string{"1× NOT_LEADER_OR_FOLLOWER"}, []string{"3× NOT_LEADER_OR_FOLLOWER"}
	writeJSON(t, dir, "max-throughput.strata.1.json", r1)
	writeJSON(t, dir, "max-throughput.strata.2.json", r2)
	writeJSON(t, dir, "max-throughput.strata.3.json", result("strata", 45, 20, 60))
	writeJSON(t, dir, "max-throughput.kfake.1.json", result("kfake", 90, 4, 8))
	writeJSON(t, dir, "max-throughput.kfake.2.json", result("kfake", 110, 6, 12))
	c := result("strata", 30, 12, 0)
	c.Scenario = "catch-up"
	c.CatchUp = &loadgen.CatchUp{BacklogBytes: 134217728, CaughtUpSeconds: 4.5, ReadMBPerSec: 210, ProducerP99Before: 8, ProducerP99During: 16, ProducerP99Increase: 2}
	c.Notes = []string{"consumers did not catch up within 5s"}
	c.Cost = &loadgen.Cost{Puts: 40, Gets: 9, PutsPerGiBIn: 20, GetsPerGiBOut: 4.5, EstimatedCostUSD: 0.01}
	writeJSON(t, dir, "catch-up.strata.1.json", c)
	failures := "catch-up\tstrata\t2\tloadgen: remote tier |never| reached\nfill\tkfake\t1\tCreateTopics: INVALID_CONFIG\nfill\tstrata\t1\texit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "failures.tsv"), []byte(failures), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func generate(t *testing.T, dir string) string {
	t.Helper()
	var out, errb bytes.Buffer
	code := run([]string{"-results", dir, "-commit", "abc1234", "-date", "2026-11-29T13:00:00Z", "-host", "2 CPU test box", "-duration", "20s", "-runs", "3"}, &out, &errb)
	if code != 0 {
		t.Fatalf("mkreport exit %d: %s", code, errb.String())
	}
	return out.String()
}

func TestMarkdownHasMediansRatiosAndMachineShares(t *testing.T) {
	md := generate(t, cannedDir(t))
	for _, want := range []string{
		"| commit | abc1234 |",
		"| machine | 2 CPU test box |",
		"| sequential file write (one fsync) | 850 MB/s (median of 2) |",
		"| loopback sendfile | 4000 MB/s (median of 2) |",
		// Overview: Strata median 45, kfake median 100, 45/850 of the disk.
		"| max-throughput | 45.0 | 100 | 0.45× | 5.3 % | 20.0 | 5.00 | 60.0 | 10.0 |",
		"| successful runs | 3 | 2 | |",
		"| produce records/s | 45000 | 100000 | 0.45× |",
		"| publish p99 (ms) | 20.0 | 5.00 | 4.00× |",
		"| end-to-end p99 (ms) | 60.0 | 10.0 | 6.00× |",
		"| Strata produce MB/s ÷ sequential write | 5.3 % | | |",
		"| errors (produce + consume) | 2 | 0 | |",                // median of 2, 4, 0
		"| Strata consume MB/s ÷ loopback sendfile | 1.1 % | | |", // 44/4000
		"Workload: 12 partitions, 1KiB records (fixed), compression none, acks all, producers 2, consumers 2, rate as fast as acknowledged, warm-up 3s, measured 20.0 s (median).",
		"- strata, 1 of 1 runs: consumers did not catch up within 5s",
		"- strata, 2 of 3 runs: 1× NOT_LEADER_OR_FOLLOWER\n\n", // 1× and 3× are one kind, shown once
		// Catch-up: Strata only, with its cost per GiB (0.01 USD over 2 GiB).
		"| successful runs | 1 | 0 | |",
		"backlog 134 MB, caught up after 4.50 s (0 of 1 runs never caught up), read 210 MB/s, producer p99 8.00 ms alone → 16.0 ms during (×2.00)",
		"40.0 PUTs and 9.00 GETs per run, 20.0 PUTs per GiB produced, 4.50 GETs per GiB consumed, request cost $0.0100 per run, $0.00500 per GiB produced",
		"- failed: strata run 2: loadgen: remote tier \\|never\\| reached",
		"## fill\n\nNo successful run.\n\n- failed: kfake run 1: CreateTopics: INVALID_CONFIG\n- failed: strata run 1: exit 1\n",
		"## How to reproduce",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q\n---\n%s", want, md)
		}
	}
	// Version 1 results record no broker resources: the row is left out,
	// never shown as zeros.
	if strings.Contains(md, "broker CPU") {
		t.Errorf("broker CPU row for results that have none\n%s", md)
	}
	// Scenario order is the shipped order, not alphabetical.
	if a, b, c := strings.Index(md, "## max-throughput"), strings.Index(md, "## catch-up"), strings.Index(md, "## fill"); !(a >= 0 && a < b && b < c) {
		t.Errorf("sections out of order: max-throughput %d, catch-up %d, fill %d", a, b, c)
	}
	// Catch-up has no kfake run: its kfake column is "–", never a zero.
	if !strings.Contains(md, "| produce MB/s | 30.0 | – | – |") {
		t.Errorf("catch-up kfake figures are not shown as missing\n%s", md)
	}
}

func TestMarkdownWritesTheOutFile(t *testing.T) {
	dir := cannedDir(t)
	out := filepath.Join(t.TempDir(), "benchmarks.md")
	var errb bytes.Buffer
	if code := run([]string{"-results", dir, "-out", out}, &bytes.Buffer{}, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(out)
	if err != nil || !strings.HasPrefix(string(b), "# Benchmarks\n") {
		t.Fatalf("out file %q, %v", b, err)
	}
}

func TestEmptyDirSaysNothingRan(t *testing.T) {
	md := generate(t, t.TempDir())
	if !strings.Contains(md, "No scenario produced a result.") || !strings.Contains(md, "| sequential file write (one fsync) | – MB/s (median of 0) |") {
		t.Errorf("empty result directory:\n%s", md)
	}
}

func TestBadInputIsAnErrorNotAPage(t *testing.T) {
	for name, setup := range map[string]func(dir string) error{
		"undecodable json": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "fixed-rate.strata.1.json"), []byte("{not json"), 0o644)
		},
		"unknown file name": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "stray.json"), []byte(`{"version":1}`), 0o644)
		},
		"not a loadgen result": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "fixed-rate.strata.1.json"), []byte(`{"scenario":"fixed-rate"}`), 0o644)
		},
		"machine without figures": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "machine.1.json"), []byte(`{"version":1,"scenario":"machine"}`), 0o644)
		},
		"short failures line": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "failures.tsv"), []byte("fill\tstrata\n"), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := setup(dir); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if code := run([]string{"-results", dir}, &out, &errb); code != 1 || out.Len() != 0 || !strings.HasPrefix(errb.String(), "mkreport: ") {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing, a one-line error", code, out.String(), errb.String())
			}
		})
	}
	var errb bytes.Buffer
	if code := run(nil, &bytes.Buffer{}, &errb); code != 2 {
		t.Errorf("no -results: exit %d, want 2", code)
	}
}

func TestMedianIgnoresMissingFigures(t *testing.T) {
	nan := func() float64 { var z float64; return z / z }()
	for _, c := range []struct {
		in   []float64
		want string
	}{{nil, "–"}, {[]float64{nan}, "–"}, {[]float64{3, 1, 2}, "2.00"}, {[]float64{4, 1, nan, 3, 2}, "2.50"}, {[]float64{6e-05}, "0.0000600"}, {[]float64{0.00251}, "0.00251"}} {
		if got := fig(median(c.in)); got != c.want {
			t.Errorf("median(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestHTMLFlagWritesAReportPerRunAndAComparisonPerScenario(t *testing.T) {
	dir := cannedDir(t)
	var errb bytes.Buffer
	if code := run([]string{"-results", dir, "-html"}, &bytes.Buffer{}, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, name := range []string{"max-throughput.strata.1.html", "max-throughput.kfake.2.html", "catch-up.strata.1.html", "max-throughput.compare.html", "catch-up.compare.html"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if n := strings.Count(string(b), "<svg data-chart="); n != len(report.ChartNames) {
			t.Errorf("%s has %d charts, want the report's %d", name, n, len(report.ChartNames))
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "max-throughput.compare.html")); !strings.Contains(string(b), "5. kfake") {
		t.Errorf("comparison page does not list the five runs, Strata first")
	}
	if _, err := os.Stat(filepath.Join(dir, "fill.compare.html")); !os.IsNotExist(err) {
		t.Errorf("a comparison page for a scenario without results: %v", err)
	}
}

// TestMarkdownReplicationSection: replication scenarios run on one node
// at RF=1, three nodes at RF=3 and kfake; the page sets the three side by
// side, with the 3-node ÷ 1-node ratio and issue 14's two targets judged
// from the medians (here the throughput target is met, 30 / 50 = 0.6×,
// and the latency target is not, 12 ms > 10 ms). A scenario without a
// 3-node run gets no replication section.
func TestMarkdownReplicationSection(t *testing.T) {
	if md := generate(t, cannedDir(t)); strings.Contains(md, "## Replication") {
		t.Fatalf("replication section without 3-node runs\n%s", md)
	}
	dir := t.TempDir()
	for i, mbs := range []float64{50, 40, 60} {
		writeJSON(t, dir, "replicated-throughput.strata."+string(rune('1'+i))+".json", result("strata", mbs, 20, 30))
	}
	writeJSON(t, dir, "replicated-throughput.strata3.1.json", result("strata3", 28, 40, 60))
	writeJSON(t, dir, "replicated-throughput.strata3.2.json", result("strata3", 32, 40, 60))
	writeJSON(t, dir, "replicated-throughput.kfake.1.json", result("kfake", 100, 5, 9))
	for target, e2e := range map[string]float64{"strata": 3, "strata3": 12, "kfake": 2} {
		r := result(target, 10, e2e, e2e)
		r.Scenario = "e2e-latency"
		r.Workload.Rate = 10000
		writeJSON(t, dir, "replicated-e2e."+target+".1.json", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "failures.tsv"), []byte("replicated-e2e\tstrata3\t2\tstrata3 did not start\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gobench := `goos: linux
BenchmarkFollowerFetch-2    	    1000	    200000 ns/op	5242.88 MB/s	    1500 B/op	      20 allocs/op
BenchmarkFollowerFetch-2    	    1000	    100000 ns/op	10485.76 MB/s	    1400 B/op	      18 allocs/op
BenchmarkFollowerFetch-2    	    1000	    300000 ns/op	3495.25 MB/s	    1600 B/op	      22 allocs/op
BenchmarkFollowerAppend-2   	   50000	     20000 ns/op	 800.00 MB/s	     512 B/op	       4 allocs/op
PASS
`
	if err := os.WriteFile(filepath.Join(dir, "gobench.txt"), []byte(gobench), 0o644); err != nil {
		t.Fatal(err)
	}
	md := generate(t, dir)
	for _, want := range []string{
		"## Replication: 3 nodes at RF=3\n",
		"| replicated-throughput | 50.0 | 30.0 | 0.60× | 100 | 30.0 | 60.0 | 9.00 |",
		"| replicated-e2e | 10.0 | 10.0 | 1.00× | 10.0 | 3.00 | 12.0 | 2.00 |",
		"- replicated-throughput: three nodes at RF=3 produce 30.0 MB/s, 0.60× of one node's 50.0 MB/s (target ≥ 0.5×): met.",
		"- replicated-e2e: end-to-end p99 on three nodes at RF=3 12.0 ms at 10000 records/s (target ≤ 10 ms): **not met**.",
		"| figure | Strata 1 node RF=1 | Strata 3 nodes RF=3 | kfake | 3 nodes ÷ 1 node | 1 node ÷ kfake |",
		"| successful runs | 3 | 2 | 1 | | |",
		"| produce MB/s | 50.0 | 30.0 | 100 | 0.60× | 0.50× |",
		"- failed: strata3 run 2: strata3 did not start",
		"median of 3 runs each",
		"| BenchmarkFollowerFetch | leader side: a follower's 1 MiB fetch over loopback (checks, follower state, HW; records by sendfile) | 200000 | 5243 | 1500 | 20.0 |",
		"| BenchmarkFollowerAppend | follower side: one fetched 16-record batch of 1 KiB records appended (CRC check, one write, producer state) | 20000 | 800 | 512 | 4.00 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q\n---\n%s", want, md)
		}
	}
	if a, b, c, d := strings.Index(md, "## Replication"), strings.Index(md, "## replicated-throughput"), strings.Index(md, "## replicated-e2e"), strings.Index(md, "<!-- replication:end -->"); !(a >= 0 && a < b && b < c && c < d) {
		t.Errorf("sections out of order: replication %d, replicated-throughput %d, replicated-e2e %d, end marker %d", a, b, c, d)
	}

	// -section replication: the block alone, between its markers, saying
	// which run it comes from.
	var out, errb bytes.Buffer
	if code := run([]string{"-results", dir, "-section", "replication", "-commit", "def5678", "-date", "2026-12-01T14:00:00Z", "-host", "2 CPU test box", "-duration", "10s", "-runs", "3"}, &out, &errb); code != 0 {
		t.Fatalf("mkreport -section replication: exit %d: %s", code, errb.String())
	}
	sec := out.String()
	if !strings.HasPrefix(sec, "<!-- replication:begin -->\n<!-- Generated by bench/run (bench/mkreport -section replication) from "+dir) ||
		!strings.HasSuffix(sec, "<!-- replication:end -->\n\n") || strings.Contains(sec, "# Benchmarks") ||
		!strings.Contains(sec, "(a run of the replication scenarios alone: 2026-12-01T14:00:00Z, commit def5678, 2 CPU test box, 10s, 3 repetitions)") ||
		!strings.Contains(sec, "| replicated-throughput | 50.0 | 30.0 | 0.60× |") {
		t.Errorf("-section replication wrote\n%s", sec)
	}
}

// TestMarkdownTransactionsSection: the transactions block compares the
// transactional scenarios with the replication scenarios' one-node runs
// of the same workloads, on Strata and kfake; -section transactions writes
// it alone between its markers.
func TestMarkdownTransactionsSection(t *testing.T) {
	dir := t.TempDir()
	for target, mbs := range map[string]float64{"strata": 100, "kfake": 200} {
		writeJSON(t, dir, "replicated-throughput."+target+".1.json", result(target, mbs, 5, 9))
		r := result(target, mbs*0.8, 6, 10)
		r.Produce.TxnCommits = 150 // 20 s: 7.5 per second
		writeJSON(t, dir, "txn-throughput."+target+".1.json", r)
		e := result(target, 10, 3, 4)
		writeJSON(t, dir, "replicated-e2e."+target+".1.json", e)
		c := result(target, 10, 3, 60)
		writeJSON(t, dir, "txn-e2e."+target+".1.json", c)
	}
	md := generate(t, dir)
	for _, want := range []string{
		"<!-- transactions:begin -->\n## Transactions\n",
		"| idempotent produce MB/s (replicated-throughput) | 100 | 200 |",
		"| transactional produce MB/s (txn-throughput) | 80.0 | 160 |",
		"| transactional ÷ idempotent | 0.80× | 0.80× |",
		"| transactions committed per second (txn-throughput) | 7.50 | 7.50 |",
		"| end-to-end p99 ms, read_committed (txn-e2e) | 60.0 | 60.0 |",
		"## txn-e2e\n",
		"<!-- transactions:end -->",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q\n---\n%s", want, md)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-results", dir, "-section", "transactions", "-commit", "def5678", "-runs", "3"}, &out, &errb); code != 0 {
		t.Fatalf("mkreport -section transactions: exit %d: %s", code, errb.String())
	}
	if sec := out.String(); !strings.HasPrefix(sec, "<!-- transactions:begin -->\n") || !strings.HasSuffix(sec, "<!-- transactions:end -->\n\n") ||
		strings.Contains(sec, "# Benchmarks") || !strings.Contains(sec, "commit def5678") {
		t.Errorf("-section transactions wrote\n%s", sec)
	}
}

// TestMarkdownKfakeFilesAndProduceTargets: with kfake persisting to
// files in the run, every table gets its column and Strata's ratio to it,
// the broker's CPU per GB and the object store's requests per GiB are
// rows, and issue 20's produce targets are a table with verdicts.
func TestMarkdownKfakeFilesAndProduceTargets(t *testing.T) {
	md := generate(t, kfakeFilesDir(t))
	for _, want := range []string{
		"persisting to files (`kfake-files`",
		// Overview: Strata 300 against kfake-files 180 (1.67×) and kfake 400.
		"| max-throughput | 300 | 180 | 1.67× | 400 | 0.75× |",
		"| fill | 300 | 250 | 1.20× | – | – |",
		"| figure | Strata | kfake-files | kfake | Strata ÷ kfake-files | Strata ÷ kfake |\n| --- | ---: | ---: | ---: | ---: | ---: |\n| successful runs | 3 | 2 | 1 | | |\n",
		"| produce MB/s | 300 | 180 | 400 | 1.67× | 0.75× |",
		"| errors (produce + consume) | 0 | 0 | 0 | | |",
		"| broker CPU per GB produced (CPU-s) | 0.900 | 3.00 | 1.50 | 0.30× | 0.60× |",
		"| broker CPU per GB consumed (CPU-s) | 0.900 | 3.10 | 1.60 | 0.29× | 0.56× |",
		"| object-store PUTs per GiB produced | 0.00 | – | – | – | – |",
		"| Strata produce MB/s ÷ sequential write | – | | | | |",
		// The targets.
		"## Produce targets\n",
		"| produce MB/s ≥ 1.5× kfake-files | max-throughput | 300 (1.67×) | 180 | 400 | met |",
		"| produce MB/s ≥ 1.5× kfake-files | fill | 300 (1.20×) | 250 | – | **not met** |",
		"| broker CPU ≤ 1 CPU-s per GB produced | max-throughput | 0.900 | 3.00 | 1.50 | met |",
		"| broker CPU ≤ 1 CPU-s per GB produced | fill | 1.20 | – | – | **not met** |",
		"| produce MB/s ≥ 1.5× kfake-files | produce-only | 330 (1.65×) | 200 | 410 | met |",
		"| broker CPU ≤ 1 CPU-s per GB produced | produce-only | 0.700 | 2.00 | 1.40 | met |",
		"| max-throughput | 300 | 180 | 1.67× | 400 | 0.75× |",
		"| produce-only | 330 | 200 | 1.65× | 410 | 0.80× |",
		"| publish p99 (ms) at 20000 records/s, unchanged or better | fixed-rate | 4.00 | 300 | – | compare with the previous page |",
		"- failed: kfake-files run 2: kfake --data-dir did not start",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q\n---\n%s", want, md)
		}
	}
	if strings.Contains(md, "3 nodes at RF=3 ≥") {
		t.Errorf("an RF=3 target without a replicated run\n%s", md)
	}
}

// kfakeFilesDir is a result directory of a produce run with kfake-files:
// three Strata, two kfake-files and one kfake max-throughput runs with
// the broker's CPU per GB, a fill and a fixed-rate run on Strata and
// kfake-files, and a failed kfake-files run.
func kfakeFilesDir(t *testing.T) string {
	dir := t.TempDir()
	withCPU := func(r *loadgen.Result, cores, perGBProd, perGBCons float64) *loadgen.Result {
		r.BrokerResources = &loadgen.BrokerResources{Sampled: true, Samples: 20, CPUCoresMean: cores, CPUCoresMax: cores,
			RSSBytesMean: 1e8, RSSBytesMax: 1e8, CPUSeconds: cores * 20, CPUSecondsPerGBProduced: perGBProd, CPUSecondsPerGBConsumed: perGBCons}
		return r
	}
	for i, mbs := range []float64{300, 280, 320} {
		r := withCPU(result("strata", mbs, 20, 30), 0.9, 0.8+0.1*float64(i), 0.9)
		r.Cost = &loadgen.Cost{PutsPerGiBIn: 0, GetsPerGiBOut: 0}
		writeJSON(t, dir, "max-throughput.strata."+string(rune('1'+i))+".json", r)
	}
	writeJSON(t, dir, "max-throughput.kfake-files.1.json", withCPU(result("kfake", 200, 40, 50), 1.5, 2.5, 2.6))
	writeJSON(t, dir, "max-throughput.kfake-files.2.json", withCPU(result("kfake", 160, 60, 70), 1.5, 3.5, 3.6))
	writeJSON(t, dir, "max-throughput.kfake.1.json", withCPU(result("kfake", 400, 10, 20), 1.6, 1.5, 1.6))
	fill := func(target string, mbs float64) *loadgen.Result {
		r := result(target, mbs, 100, 0)
		r.Scenario, r.Workload.FillBytes = "fill", "256MiB"
		return r
	}
	po := func(target string, mbs, perGB float64) *loadgen.Result {
		r := withCPU(result(target, mbs, 30, 0), 0.5, perGB, 0)
		r.Workload.Consumers, r.Consume = 0, loadgen.Summary{}
		r.LoadgenResources = &loadgen.LoadgenResources{CPUCoresMean: 1.2, CPUSeconds: 24, CPUSecondsPerGBProduced: 1.2 * 20 / (mbs * 20 / 1000), MachineCores: 2}
		return r
	}
	writeJSON(t, dir, "produce-only.strata.1.json", po("strata", 330, 0.7))
	writeJSON(t, dir, "produce-only.kfake-files.1.json", po("kfake", 200, 2))
	writeJSON(t, dir, "produce-only.kfake.1.json", po("kfake", 410, 1.4))
	writeJSON(t, dir, "fill.strata.1.json", withCPU(fill("strata", 300), 1, 1.2, 0))
	writeJSON(t, dir, "fill.kfake-files.1.json", fill("kfake", 250))
	fr := result("strata", 25, 4, 0)
	fr.Scenario, fr.Workload.Rate = "fixed-rate", 20000
	writeJSON(t, dir, "fixed-rate.strata.1.json", fr)
	writeJSON(t, dir, "fixed-rate.kfake-files.1.json", result("kfake", 25, 300, 0))
	if err := os.WriteFile(filepath.Join(dir, "failures.tsv"), []byte("fixed-rate\tkfake-files\t2\tkfake --data-dir did not start\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestProduceSectionIsABlockBetweenMarkers: -section produce writes the
// produce block alone (for bench/run's BENCH_DOC_SECTION=produce): which
// run it is, the overview, the targets and the scenarios one heading
// level down, between its markers.
func TestProduceSectionIsABlockBetweenMarkers(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"-results", kfakeFilesDir(t), "-section", "produce", "-commit", "abc1234", "-date", "2026-12-02T01:00:00Z", "-host", "2 CPU test box", "-duration", "10s", "-runs", "3"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	md := out.String()
	if !strings.HasPrefix(md, "<!-- produce:begin -->\n") || !strings.HasSuffix(md, "<!-- produce:end -->\n\n") {
		t.Errorf("not a block between the produce markers:\n%s", md)
	}
	for _, want := range []string{
		"## Produce path: Strata, kfake-files and kfake\n",
		"(2026-12-02T01:00:00Z, commit abc1234, 2 CPU test box, 10s, 3 repetitions; medians)",
		"| max-throughput | 300 | 180 | 1.67× | 400 | 0.75× |",
		"| produce MB/s ≥ 1.5× kfake-files | max-throughput | 300 (1.67×) | 180 | 400 | met |",
		"\n### max-throughput\n",
		"\n### fill\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("block lacks %q\n---\n%s", want, md)
		}
	}
	for _, not := range []string{"# Benchmarks", "## How to reproduce", "\n## max-throughput"} {
		if strings.Contains(md, not) {
			t.Errorf("block has %q\n---\n%s", not, md)
		}
	}
}

// TestProduceTargetsSayWhatTheMachineAllows: with the load generator's
// CPU in the results, the targets are followed by how much of the machine
// broker and load generator used, and the rate a broker that cost nothing
// could reach with that load generator on these cores.
func TestProduceTargetsSayWhatTheMachineAllows(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-results", kfakeFilesDir(t), "-section", "produce", "-runs", "1"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	md := out.String()
	for _, want := range []string{
		// produce-only: Strata 0.5 cores + load generator 1.2 of 2; 3.64 CPU-s/GB at 330 MB/s
		"In produce-only the load generator used 1.20 cores and Strata 0.500: together 85 % of the machine's cores (in kfake-files' runs 85 %). ",
		"The load generator alone spends 3.64 CPU-s per GB it produces, so even a broker that cost nothing would reach at most 550 MB/s here, 2.75× kfake-files' rate. ",
		"| load generator CPU (mean) (cores) | 1.20 | 1.20 | 1.20 |",
		// 2 cores / (1.5 × 200 MB/s) = 6.67 CPU-s/GB for both, less the load generator's 3.64
		"Reaching 1.5× kfake-files with every core busy would take a broker at 3.03 CPU-s per GB or less (Strata: 0.700). ",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("block lacks %q\n---\n%s", want, md)
		}
	}
}

// TestCatchUpOnMinIOAgainstRawGet: catch-up runs that read from an S3
// remote store, and machine measurements with a raw ranged GET from it in
// the same run: the page gives the GET rate, the remote reader's GETs per
// GiB and hit ratio, and catch-up ÷ raw GET (median 300 of 200, 300, 400
// against the median raw GET 600 of 500, 700: 0.50×).
func TestCatchUpOnMinIOAgainstRawGet(t *testing.T) {
	dir := t.TempDir()
	for i, g := range []float64{500, 700} {
		writeJSON(t, dir, fmt.Sprintf("machine.%d.json", i+1), &loadgen.Result{Version: 1, Scenario: "machine",
			Machine: &loadgen.Machine{SeqWriteMBPerSec: 800, LoopbackSendfileMBs: 3000, S3Get: &loadgen.S3Get{Bytes: 128 << 20, GETs: 32, ChunkBytes: 4 << 20, MBPerSec: g}}})
	}
	for i, mbs := range []float64{200, 300, 400} {
		c := result("strata", 10, 12, 0)
		c.Scenario = "catch-up"
		c.CatchUp = &loadgen.CatchUp{BacklogBytes: 128 << 20, CaughtUpSeconds: 2, ReadMBPerSec: mbs, ReadMBPerSecFirst: mbs * 2, ProducerP99Before: 6, ProducerP99During: 8, ProducerP99Increase: 8.0 / 6,
			BrokerProduceP99Before: 1, BrokerProduceP99During: 1.2 + float64(i)/10}
		c.Cost = &loadgen.Cost{Backend: "s3", RemoteGetsPerGiBRead: 256 + float64(i), CacheHitRatio: 0.5 + float64(i)/10}
		writeJSON(t, dir, fmt.Sprintf("catch-up.strata.%d.json", i+1), c)
	}
	md := generate(t, dir)
	for _, want := range []string{
		"| object store ranged GET (one stream, 4 MiB per GET) | 600 MB/s (median of 2) |",
		"Catch-up (Strata, remote store s3, median of 3): backlog 134 MB, caught up after 2.00 s (0 of 3 runs never caught up), read 300 MB/s, producer p99 6.00 ms alone → 8.00 ms during (×1.33).",
		"Inside the broker (its produce request latency, the same phases): p99 1.00 ms alone → 1.30 ms during (×1.30); the rest of the producers' p99 is the client's own.",
		"Remote reads: 257 GETs per GiB read from the remote tier, chunk-cache hit ratio 0.600; a raw ranged GET (one stream, 4 MiB per GET) from the same object store in the same run: 600 MB/s (median of 2), so catch-up ÷ raw GET = 0.50× (1.00× from the consumers' first record: 600 MB/s, without the group join).",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q\n---\n%s", want, md)
		}
	}
	// A catch-up from the fs store is not held against the S3 GET.
	for i := range 3 {
		c := result("strata", 10, 12, 0)
		c.Scenario = "catch-up"
		c.CatchUp = &loadgen.CatchUp{ReadMBPerSec: 300}
		c.Cost = &loadgen.Cost{Backend: "fs", CacheHitRatio: 0.5}
		writeJSON(t, dir, fmt.Sprintf("catch-up.strata.%d.json", i+1), c)
	}
	if md := generate(t, dir); strings.Contains(md, "catch-up ÷ raw GET") || !strings.Contains(md, "remote store fs") {
		t.Errorf("an fs catch-up held against the S3 GET, or its store not named\n%s", md)
	}
}
