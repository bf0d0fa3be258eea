// Command mkreport turns one bench/run result directory into
// docs/benchmarks.md: per scenario, the median of each figure over the
// repetitions for Strata and for the kfake peer, their ratio, Strata's
// MB/s as a share of the machine's raw sequential write and loopback
// sendfile measured in the same run, p99s, object-store cost per GiB, and
// every failed run with its reason.
//
// It owns the benchmark page's layout and nothing else: it never runs a
// benchmark and never invents a figure — a figure no run produced is
// shown as "–", and a scenario without any successful run says so.
//
// Usage (bench/run calls it):
//
//	go run ./bench/mkreport -results bench/results/20261129T130000Z -out docs/benchmarks.md \
//	    -commit abc1234 -date 2026-11-29T13:00:00Z -host "2 CPU, ..." -duration 20s -runs 3
//
// The result directory holds machine.<n>.json (`strata loadgen machine
// --out`), <scenario>.<target>.<n>.json (`strata loadgen <scenario> --out`)
// and failures.tsv (scenario, target, run, reason; tab-separated). With
// -html it also renders each run's HTML report (loadgen/report) beside its
// JSON and a <scenario>.compare.html of all runs of a scenario.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-io/strata/loadgen"
	"github.com/strata-io/strata/loadgen/report"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// meta is what the page says about the run besides its results.
type meta struct {
	Commit, Date, Host, Duration, Results string
	Runs                                  int
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mkreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var m meta
	dir := fs.String("results", "", "result directory written by bench/run")
	out := fs.String("out", "", "markdown file to write (default stdout)")
	fs.StringVar(&m.Commit, "commit", "", "commit benchmarked")
	fs.StringVar(&m.Date, "date", "", "date of the run")
	fs.StringVar(&m.Host, "host", "", "machine description")
	fs.StringVar(&m.Duration, "duration", "", "measured phase of each run")
	fs.IntVar(&m.Runs, "runs", 0, "repetitions asked for")
	section := fs.String("section", "", "write only this block of the page (replication, transactions or produce), between its markers")
	htmlToo := fs.Bool("html", false, "also write <name>.html beside each run's JSON and <scenario>.compare.html per scenario")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: mkreport -results DIR [-out FILE] [-commit C -date D -host H -duration D -runs N]")
		return 2
	}
	m.Results = *dir
	set, err := load(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "mkreport: %v\n", err)
		return 1
	}
	if *htmlToo {
		if err := writeHTMLs(*dir, set); err != nil {
			fmt.Fprintf(stderr, "mkreport: %v\n", err)
			return 1
		}
	}
	w := stdout
	var f *os.File
	if *out != "" {
		if f, err = os.Create(*out); err != nil {
			fmt.Fprintf(stderr, "mkreport: %v\n", err)
			return 1
		}
		w = f
	}
	bw := bufio.NewWriter(w)
	switch *section {
	case "":
		writeMarkdown(bw, m, set)
	case "replication":
		writeSection(bw, m, set)
	case "transactions":
		seq := median(collect(set.machines, func(x *loadgen.Machine) float64 { return x.SeqWriteMBPerSec }))
		sf := median(collect(set.machines, func(x *loadgen.Machine) float64 { return x.LoopbackSendfileMBs }))
		var b strings.Builder
		writeTransactionsBlock(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }, set, seq, sf)
		block := b.String()
		if block == "" {
			block = transactionsBegin + "\nNo transaction scenario ran.\n" + transactionsEnd + "\n"
		}
		block = strings.Replace(block, "on one node; ", fmt.Sprintf("on one node (a run of these scenarios alone: %s, commit %s, %s, %s, %d repetitions); ",
			na(m.Date), na(m.Commit), na(m.Host), na(m.Duration), m.Runs), 1)
		fmt.Fprint(bw, block)
	case "produce":
		writeProduceSection(bw, m, set)
	default:
		fmt.Fprintf(stderr, "mkreport: -section %q: want replication, transactions or produce\n", *section)
		return 2
	}
	err = bw.Flush()
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "mkreport: %v\n", err)
		return 1
	}
	return 0
}

// failure is one run that produced no result.
type failure struct{ Scenario, Target, Run, Reason string }

// resultSet is a result directory, loaded.
type resultSet struct {
	paths    map[*loadgen.Result]string // each run's JSON file
	machines []*loadgen.Machine
	runs     map[string]map[string][]*loadgen.Result // scenario → target → repetitions
	failures []failure
	gobench  map[string][]goBench // gobench.txt: name → runs
	goOrder  []string
}

// goBench is one line of `go test -bench -benchmem` output.
type goBench struct{ nsOp, mbS, bOp, allocsOp float64 }

// goBenchLine matches "BenchmarkX-2  1234  567 ns/op  89.1 MB/s  1024 B/op  3 allocs/op".
var goBenchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) MB/s)?(?:\s+([\d.]+) B/op)?(?:\s+([\d.]+) allocs/op)?`)

// parseGoBench reads `go test -bench -benchmem` output; figures missing
// from a line are NaN.
func parseGoBench(b []byte) (map[string][]goBench, []string) {
	out := map[string][]goBench{}
	var order []string
	num := func(s string) float64 {
		if s == "" {
			return math.NaN()
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return math.NaN()
		}
		return v
	}
	for _, line := range strings.Split(string(b), "\n") {
		m := goBenchLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		if _, ok := out[m[1]]; !ok {
			order = append(order, m[1])
		}
		out[m[1]] = append(out[m[1]], goBench{num(m[2]), num(m[3]), num(m[4]), num(m[5])})
	}
	return out, order
}

// load reads a result directory. A JSON file that does not decode is an
// error (the page would silently lose a run otherwise); a missing
// failures.tsv means none failed.
func load(dir string) (*resultSet, error) {
	s := &resultSet{runs: map[string]map[string][]*loadgen.Result{}, paths: map[*loadgen.Result]string{}}
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for _, name := range names {
		parts := strings.Split(strings.TrimSuffix(filepath.Base(name), ".json"), ".")
		r, err := loadgen.ReadResult(name)
		if err != nil {
			return nil, err
		}
		switch {
		case len(parts) == 2 && parts[0] == "machine":
			if r.Machine == nil {
				return nil, fmt.Errorf("%s: no machine figures", name)
			}
			s.machines = append(s.machines, r.Machine)
		case len(parts) == 3:
			scenario, target := parts[0], parts[1]
			if s.runs[scenario] == nil {
				s.runs[scenario] = map[string][]*loadgen.Result{}
			}
			s.runs[scenario][target] = append(s.runs[scenario][target], r)
			s.paths[r] = name
		default:
			return nil, fmt.Errorf("%s: want machine.<n>.json or <scenario>.<target>.<n>.json", name)
		}
	}
	if gb, err := os.ReadFile(filepath.Join(dir, "gobench.txt")); err == nil {
		s.gobench, s.goOrder = parseGoBench(gb)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "failures.tsv"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for i, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 4)
		if len(f) != 4 {
			return nil, fmt.Errorf("failures.tsv line %d: want 4 tab-separated fields, got %q", i+1, line)
		}
		s.failures = append(s.failures, failure{f[0], f[1], f[2], f[3]})
	}
	return s, nil
}

// writeHTMLs renders each run's HTML report beside its JSON, and one
// comparison page per scenario with every run of it (Strata first).
func writeHTMLs(dir string, s *resultSet) error {
	for _, sc := range s.scenarios() {
		var all []*loadgen.Result
		for _, target := range []string{"strata", "kfake"} {
			all = append(all, s.runs[sc][target]...)
		}
		var others []string
		for target := range s.runs[sc] {
			if target != "strata" && target != "kfake" {
				others = append(others, target)
			}
		}
		sort.Strings(others)
		for _, target := range others {
			all = append(all, s.runs[sc][target]...)
		}
		for _, r := range all {
			if err := loadgen.WriteFile(strings.TrimSuffix(s.paths[r], ".json")+".html", func(w io.Writer) error { return report.WriteHTML(w, r) }); err != nil {
				return err
			}
		}
		if len(all) > 0 {
			if err := loadgen.WriteFile(filepath.Join(dir, sc+".compare.html"), func(w io.Writer) error { return report.WriteHTMLCompare(w, all) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// scenarioOrder is the page's order; unknown scenarios follow, sorted.
var scenarioOrder = []string{"max-throughput", produceOnly, "fixed-rate", "e2e-latency", "catch-up", "fill", replicatedThroughput, replicatedE2E, txnThroughput, txnE2E}

// The transaction scenarios (issue 16) are the replication scenarios'
// workloads (1KiB, acks=all) with transactional producers committing
// every 100 ms, and read_committed consumers for txn-e2e: compared with
// replicated-throughput and replicated-e2e on one node (the same
// workloads, idempotent, read_uncommitted) in the same run.
const (
	txnThroughput = "txn-throughput"
	txnE2E        = "txn-e2e"
)

func transactional(sc string) bool { return sc == txnThroughput || sc == txnE2E }

// The replication scenarios run on three targets: one node at RF=1
// ("strata"), three nodes at RF=3 ("strata3": scripts/cluster3, acks=all,
// min.insync.replicas=2) and kfake; issue 14's targets are a 3-node
// produce MB/s of at least half one node's, and an end-to-end p99 of at
// most 10 ms at 10k records/s on three nodes.
const (
	replicatedThroughput  = "replicated-throughput"
	replicatedE2E         = "replicated-e2e"
	cluster3Target        = "strata3"
	targetThroughputRatio = 0.5
	targetE2EP99Ms        = 10.0
)

func (s *resultSet) scenarios() []string {
	seen := map[string]bool{}
	var out []string
	for _, sc := range scenarioOrder {
		if s.runs[sc] != nil || s.failed(sc, "") {
			out = append(out, sc)
			seen[sc] = true
		}
	}
	var rest []string
	for sc := range s.runs {
		if !seen[sc] {
			rest = append(rest, sc)
			seen[sc] = true
		}
	}
	for _, f := range s.failures {
		if !seen[f.Scenario] {
			rest = append(rest, f.Scenario)
			seen[f.Scenario] = true
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func (s *resultSet) failed(scenario, target string) bool {
	for _, f := range s.failures {
		if (scenario == "" || f.Scenario == scenario) && (target == "" || f.Target == target) {
			return true
		}
	}
	return false
}

// median of the finite values; NaN when there are none.
func median(vs []float64) float64 {
	var xs []float64
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// med is the median of get over runs; NaN when no run has the figure
// (get returns NaN for "not measured").
func med(runs []*loadgen.Result, get func(*loadgen.Result) float64) float64 {
	vs := make([]float64, len(runs))
	for i, r := range runs {
		vs[i] = get(r)
	}
	return median(vs)
}

// metric is one row of a scenario table.
type metric struct {
	name  string
	unit  string
	get   func(*loadgen.Result) float64
	count bool // a count: shown as an integer, no ratio
}

// positive is v when it was measured (> 0), else NaN: a zero latency or
// rate means the side did not run (no consumers), not a perfect figure.
func positive(v float64) float64 {
	if v > 0 {
		return v
	}
	return math.NaN()
}

var metrics = []metric{
	{"produce records/s", "", func(r *loadgen.Result) float64 { return positive(r.Produce.RecordsPerSec) }, false},
	{"produce MB/s", "", func(r *loadgen.Result) float64 { return positive(r.Produce.MBPerSec) }, false},
	{"consume MB/s", "", func(r *loadgen.Result) float64 { return positive(r.Consume.MBPerSec) }, false},
	{"publish p50", "ms", func(r *loadgen.Result) float64 { return positive(r.Produce.Latency.P50) }, false},
	{"publish p99", "ms", func(r *loadgen.Result) float64 { return positive(r.Produce.Latency.P99) }, false},
	{"publish p99.9", "ms", func(r *loadgen.Result) float64 { return positive(r.Produce.Latency.P999) }, false},
	{"end-to-end p50", "ms", func(r *loadgen.Result) float64 { return positive(r.EndToEnd.P50) }, false},
	{"end-to-end p99", "ms", func(r *loadgen.Result) float64 { return positive(r.EndToEnd.P99) }, false},
	{"end-to-end p99.9", "ms", func(r *loadgen.Result) float64 { return positive(r.EndToEnd.P999) }, false},
	// Version 2 figures ("–" for older results and targets without /metrics).
	{"publish p95", "ms", func(r *loadgen.Result) float64 { return positive(r.Produce.Latency.P95) }, false},
	{"errors (produce + consume)", "", func(r *loadgen.Result) float64 { return float64(r.Produce.Errors + r.Consume.Errors) }, true},
	{"produce records/s cv (stddev / mean per second)", "", func(r *loadgen.Result) float64 {
		if r.Stability == nil || r.Stability.Produce.Samples == 0 {
			return math.NaN()
		}
		return r.Stability.Produce.CV
	}, false},
	{"broker CPU (mean)", "cores", func(r *loadgen.Result) float64 {
		if b := r.BrokerResources; b != nil && b.Sampled {
			return positive(b.CPUCoresMean)
		}
		return math.NaN()
	}, false},
	{"broker RSS (max)", "MB", func(r *loadgen.Result) float64 {
		if b := r.BrokerResources; b != nil && b.Sampled {
			return positive(b.RSSBytesMax / 1e6)
		}
		return math.NaN()
	}, false},
	{"broker CPU per GB produced", "CPU-s", cpuPerGBProduced, false},
	{"load generator CPU (mean)", "cores", loadgenCores, false},
	{"broker + load generator CPU ÷ machine cores", "", machineBusy, false},
	{"broker CPU per GB consumed", "CPU-s", func(r *loadgen.Result) float64 {
		if b := r.BrokerResources; b != nil && b.Sampled {
			return positive(b.CPUSecondsPerGBConsumed)
		}
		return math.NaN()
	}, false},
	// Zero is a figure here (a node that tiers nothing puts nothing).
	{"object-store PUTs per GiB produced", "", func(r *loadgen.Result) float64 {
		if r.Cost == nil || r.Produce.Bytes <= 0 {
			return math.NaN()
		}
		return r.Cost.PutsPerGiBIn
	}, false},
	{"object-store GETs per GiB consumed", "", func(r *loadgen.Result) float64 {
		if r.Cost == nil || r.Consume.Bytes <= 0 {
			return math.NaN()
		}
		return r.Cost.GetsPerGiBOut
	}, false},
}

// loadgenCores is the load generator's mean CPU over the measured phase
// (results from before version 2's loadgenResources: none).
func loadgenCores(r *loadgen.Result) float64 {
	if l := r.LoadgenResources; l != nil {
		return positive(l.CPUCoresMean)
	}
	return math.NaN()
}

// machineBusy is the share of the machine's cores the broker and the load
// generator used together in the measured phase: near 1, the run measured
// the machine (both share it), not the broker alone.
func machineBusy(r *loadgen.Result) float64 {
	l, b := r.LoadgenResources, r.BrokerResources
	if l == nil || l.MachineCores <= 0 || b == nil || !b.Sampled || !(b.CPUCoresMean > 0) {
		return math.NaN()
	}
	return (l.CPUCoresMean + b.CPUCoresMean) / float64(l.MachineCores)
}

// cpuPerGBProduced is the broker's CPU-seconds per GB produced (loadgen's
// BrokerResources: its process CPU over the measured phase).
func cpuPerGBProduced(r *loadgen.Result) float64 {
	if b := r.BrokerResources; b != nil && b.Sampled {
		return positive(b.CPUSecondsPerGBProduced)
	}
	return math.NaN()
}

// The peers Strata is measured against: franz-go's kfake persisting to
// files (`strata loadgen kfake --data-dir`: a Go broker writing to disk
// as Strata does, the target of issue 20's ratios) and in memory (no disk
// at all: the ceiling).
const (
	kfakeFilesTarget = "kfake-files"
	kfakeTarget      = "kfake"
)

// peers are the peer targets of the page's tables: kfake-files (when
// any scenario ran or failed on it) and kfake.
func (s *resultSet) peers() []string {
	for _, byTarget := range s.runs {
		if len(byTarget[kfakeFilesTarget]) > 0 {
			return []string{kfakeFilesTarget, kfakeTarget}
		}
	}
	if s.failed("", kfakeFilesTarget) {
		return []string{kfakeFilesTarget, kfakeTarget}
	}
	return []string{kfakeTarget}
}

func writeMarkdown(w io.Writer, m meta, s *resultSet) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# Benchmarks\n\n")
	p("<!-- Generated by bench/run (bench/mkreport) from %s; do not edit by hand. -->\n\n", m.Results)
	if len(s.peers()) == 1 {
		p("Strata against franz-go's in-memory `kfake` broker (no disk at all: the ceiling a Go Kafka broker could reach on this machine) under the shipped `strata loadgen` scenarios, with the machine's raw limits measured in the same run. ")
	} else {
		p("Strata against franz-go's `kfake` broker persisting to files (`kfake-files`: `strata loadgen kfake --data-dir`, segment and index files written through the page cache and fsynced on roll, as Kafka's default flush settings — the Go broker that writes to disk as Strata does) and in memory (`kfake`: no disk at all, the ceiling a Go Kafka broker could reach on this machine) under the shipped `strata loadgen` scenarios, with the machine's raw limits measured in the same run. ")
	}
	p("Each figure is the median of the repetitions that succeeded; a run that failed is listed under its scenario with the reason and counts in no median. ")
	p("Ratios are Strata ÷ the peer: above 1 is better for throughput, below 1 is better for latency.\n\n")
	p("| | |\n| --- | --- |\n")
	p("| date | %s |\n| commit | %s |\n| machine | %s |\n| measured phase per run | %s |\n| repetitions | %d |\n", na(m.Date), na(m.Commit), na(m.Host), na(m.Duration), m.Runs)
	seq := median(collect(s.machines, func(x *loadgen.Machine) float64 { return x.SeqWriteMBPerSec }))
	sf := median(collect(s.machines, func(x *loadgen.Machine) float64 { return x.LoopbackSendfileMBs }))
	p("| sequential file write (one fsync) | %s MB/s (median of %d) |\n", fig(seq), len(s.machines))
	p("| loopback sendfile | %s MB/s (median of %d) |\n", fig(sf), len(s.machines))
	if g, n, chunk := rawGet(s.machines); n > 0 {
		p("| object store ranged GET (one stream, %s per GET) | %s MB/s (median of %d) |\n", sizeName(chunk), fig(g), n)
	}
	p("\n")

	scenarios := s.scenarios()
	if len(scenarios) == 0 {
		p("No scenario produced a result.\n\n")
	}
	if len(scenarios) > 0 {
		p("## Overview\n\n")
		writeOverview(p, s, scenarios, seq)
		writeProduceTargets(p, s)
	}
	for _, sc := range scenarios {
		if !s.replicated(sc) && !transactional(sc) {
			writeScenario(p, s, sc, seq, sf)
		}
	}
	writeReplicationBlock(p, s, seq, sf)
	writeTransactionsBlock(p, s, seq, sf)
	writeHowTo(p)
}

// writeOverview is the table of every scenario's produce MB/s and p99s,
// Strata beside each peer.
func writeOverview(p func(string, ...any), s *resultSet, scenarios []string, seq float64) {
	if len(s.peers()) == 1 {
		p("| scenario | Strata produce MB/s | kfake produce MB/s | ratio | Strata MB/s ÷ seq. write | Strata publish p99 (ms) | kfake publish p99 (ms) | Strata e2e p99 (ms) | kfake e2e p99 (ms) |\n")
		p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, sc := range scenarios {
			st, kf := s.runs[sc]["strata"], s.runs[sc]["kfake"]
			smb, kmb := med(st, metrics[1].get), med(kf, metrics[1].get)
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", sc, fig(smb), fig(kmb), ratio(smb, kmb), pct(smb, seq),
				fig(med(st, metrics[4].get)), fig(med(kf, metrics[4].get)), fig(med(st, metrics[7].get)), fig(med(kf, metrics[7].get)))
		}
	} else {
		p("| scenario | Strata produce MB/s | kfake-files produce MB/s | Strata ÷ kfake-files | kfake produce MB/s | Strata ÷ kfake | Strata MB/s ÷ seq. write | Strata publish p99 (ms) | kfake-files publish p99 (ms) | kfake publish p99 (ms) | Strata e2e p99 (ms) | kfake-files e2e p99 (ms) | kfake e2e p99 (ms) |\n")
		p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, sc := range scenarios {
			st, kff, kf := s.runs[sc]["strata"], s.runs[sc][kfakeFilesTarget], s.runs[sc][kfakeTarget]
			smb, fmb, kmb := med(st, metrics[1].get), med(kff, metrics[1].get), med(kf, metrics[1].get)
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", sc, fig(smb), fig(fmb), ratio(smb, fmb), fig(kmb), ratio(smb, kmb), pct(smb, seq),
				fig(med(st, metrics[4].get)), fig(med(kff, metrics[4].get)), fig(med(kf, metrics[4].get)),
				fig(med(st, metrics[7].get)), fig(med(kff, metrics[7].get)), fig(med(kf, metrics[7].get)))
		}
	}
	p("\n")
}

// writeHowTo is the page's last section.
func writeHowTo(p func(string, ...any)) {
	p("## How to reproduce\n\n")
	p("```\nmake bench                                  # or: bench/run\nBENCH_DURATION=60s RUNS=5 bench/run         # longer runs, more repetitions\n```\n\n")
	p("`bench/run` builds `strata`, measures the machine (`strata loadgen machine`), starts a Strata node on 127.0.0.1 with a fresh data directory and free ports, starts the kfake peer (`strata loadgen kfake`, and `--data-dir` for kfake-files unless `BENCH_KFAKE_FILES=0`; with `--metrics-listen`, so its CPU is sampled as Strata's is), runs each scenario against each with `--duration $BENCH_DURATION` (default 20s) RUNS times (default 3), keeps every JSON result and HTML report in `bench/results/<timestamp>/` (not committed), and regenerates this page with `go run ./bench/mkreport`. ")
	p("The replication scenarios (%s, %s) also start three nodes with `scripts/cluster3` (fresh data directories, free ports) and run on them with `--replication-factor 3 --topic-config min.insync.replicas=2`; their records are 1KiB, acks=all, and %s runs open-loop at `BENCH_E2E_RATE` records/s (default 10000). ", replicatedThroughput, replicatedE2E, replicatedE2E)
	p("The transaction scenarios (%s, %s) are the replication scenarios' workloads with `--txn-interval 100ms` (transactional producers committing every 100 ms), %s with `--isolation read_committed` consumers. ", txnThroughput, txnE2E, txnE2E)
	p("Catch-up runs against Strata only (it reads back a backlog that lives in the remote tier: 4 MiB segments, 4 MiB of local retention a partition, retention checked every second, so most of the `BENCH_CATCHUP_FILL` backlog, default 128MiB, is below the local start); when a `minio` binary is installed (`BENCH_MINIO`, else `$(go env GOPATH)/bin/minio` or PATH) its remote tier is an S3 bucket on a MinIO started for the run on 127.0.0.1, and `strata loadgen machine --s3-endpoint` measures a raw ranged GET (one stream, 4 MiB per GET, minio-go) of a backlog-sized object from that MinIO in the same run; without one the remote tier is the fs store. fill writes a small fixed amount (`BENCH_FILL`, default 256MiB) instead of the preset's 10GiB. ")
	p("Object-store cost comes from the node's `/metrics` before and after each run (`--metrics-url`), priced at $0.005 per 1000 PUT/LIST and $0.0004 per 1000 GET. ")
	p("Single runs on a shared 2-core machine vary by tens of percent: compare medians, and rerun before drawing conclusions.\n")
}

// Markers around the produce block (BENCH_DOC_SECTION=produce).
const (
	produceBegin = "<!-- produce:begin -->"
	produceEnd   = "<!-- produce:end -->"
)

// writeProduceSection is the produce block alone (bench/run with
// BENCH_DOC_SECTION=produce puts it in a page of an earlier full run):
// the run it comes from and the machine's limits in it, the overview of
// its scenarios against the peers, issue 20's targets, and each
// (non-replicated) scenario's table one heading level down.
func writeProduceSection(w io.Writer, m meta, s *resultSet) {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	seq := median(collect(s.machines, func(x *loadgen.Machine) float64 { return x.SeqWriteMBPerSec }))
	sf := median(collect(s.machines, func(x *loadgen.Machine) float64 { return x.LoopbackSendfileMBs }))
	p("%s\n<!-- Generated by bench/run (bench/mkreport -section produce) from %s; do not edit by hand. -->\n\n", produceBegin, m.Results)
	p("## Produce path: Strata, kfake-files and kfake\n\n")
	p("A run of the produce scenarios alone (%s, commit %s, %s, %s, %d repetitions; medians): Strata against franz-go's kfake persisting to files (`kfake-files`, `strata loadgen kfake --data-dir`) and in memory (`kfake`), the same load generator and workload, interleaved run by run. ",
		na(m.Date), na(m.Commit), na(m.Host), na(m.Duration), m.Runs)
	p("The machine's limits in the same run: sequential file write %s MB/s, loopback sendfile %s MB/s. ", fig(seq), fig(sf))
	p("The machine is shared (other work ran beside the benchmark): figures vary by tens of percent from run to run.\n\n")
	scenarios := s.scenarios()
	if len(scenarios) == 0 {
		p("No scenario produced a result.\n\n")
	} else {
		writeOverview(p, s, scenarios, seq)
		writeProduceTargets(p, s)
		for _, sc := range scenarios {
			if !s.replicated(sc) && !transactional(sc) {
				var sb strings.Builder
				writeScenario(func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }, s, sc, seq, sf)
				p("#%s", sb.String()) // "## sc" → "### sc": inside this block
			}
		}
	}
	p("%s\n\n", produceEnd)
	fmt.Fprint(w, b.String())
}

// Issue 20's produce targets: Strata produces at least 1.5× kfake
// persisting to files with the same load generator, at most 1 CPU-second
// of the broker per GB produced at that rate; publish p99 at 20k
// records/s (fixed-rate) is shown beside the peers' (the target,
// "unchanged or better", is against an earlier page); three nodes at
// RF=3 produce at least half of one node at RF=1.
const (
	produceOnly         = "produce-only" // max-throughput without consumers (bench/run)
	targetFilesRatio    = 1.5
	targetCPUPerGB      = 1.0
	produceTargetScheme = "max-throughput"
)

// writeProduceTargets is the page's table of issue 20's produce targets,
// each with its figure and whether it was met (medians; "not measured"
// when a side has no run), when kfake-files ran.
func writeProduceTargets(p func(string, ...any), s *resultSet) {
	if len(s.peers()) == 1 { // a run without kfake-files (BENCH_KFAKE_FILES=0, or an older one)
		return
	}
	p("## Produce targets\n\n")
	p("Issue 20's targets for the produce path, from the medians above: Strata's produce MB/s against kfake persisting to files (`--data-dir`) with the same load generator, the broker's CPU-seconds per GB at that rate (its `process_cpu_seconds_total` over the measured phase ÷ GB of record keys and values; both sides of a scenario with consumers share that CPU, so per GB produced includes the consumers' reads), publish p99 at 20k records/s, and three nodes at RF=3 against one at RF=1.\n\n")
	p("| target | scenario | Strata | kfake-files | kfake | verdict |\n| --- | --- | ---: | ---: | ---: | --- |\n")
	mb := metrics[1].get
	for _, sc := range []string{produceTargetScheme, produceOnly, "fill"} {
		if len(s.runs[sc]) == 0 {
			continue
		}
		st, kff, kf := med(s.runs[sc]["strata"], mb), med(s.runs[sc][kfakeFilesTarget], mb), med(s.runs[sc][kfakeTarget], mb)
		p("| produce MB/s ≥ %.1f× kfake-files | %s | %s (%s) | %s | %s | %s |\n", targetFilesRatio, sc, fig(st), ratio(st, kff), fig(kff), fig(kf),
			verdict(kff > 0 && st/kff >= targetFilesRatio, math.IsNaN(st) || math.IsNaN(kff)))
	}
	for _, sc := range []string{produceTargetScheme, produceOnly, "fill"} {
		if len(s.runs[sc]) == 0 {
			continue
		}
		st := med(s.runs[sc]["strata"], cpuPerGBProduced)
		p("| broker CPU ≤ %.0f CPU-s per GB produced | %s | %s | %s | %s | %s |\n", targetCPUPerGB, sc, fig(st),
			fig(med(s.runs[sc][kfakeFilesTarget], cpuPerGBProduced)), fig(med(s.runs[sc][kfakeTarget], cpuPerGBProduced)),
			verdict(st <= targetCPUPerGB, math.IsNaN(st)))
	}
	if r := s.runs["fixed-rate"]; len(r) > 0 {
		get := metrics[4].get
		rate := "–"
		if st := r["strata"]; len(st) > 0 && st[0].Workload.Rate > 0 {
			rate = strconv.FormatInt(st[0].Workload.Rate, 10)
		}
		p("| publish p99 (ms) at %s records/s, unchanged or better | fixed-rate | %s | %s | %s | compare with the previous page |\n", rate,
			fig(med(r["strata"], get)), fig(med(r[kfakeFilesTarget], get)), fig(med(r[kfakeTarget], get)))
	}
	if r := s.runs[replicatedThroughput]; len(r) > 0 {
		one, three := med(r["strata"], mb), med(r[cluster3Target], mb)
		p("| 3 nodes at RF=3 ≥ %.1f× 1 node at RF=1 | %s | %s ÷ %s MB/s = %s | | %s | %s |\n", targetThroughputRatio, replicatedThroughput,
			fig(three), fig(one), ratio(three, one), fig(med(r[kfakeTarget], mb)),
			verdict(!math.IsNaN(one) && one > 0 && three/one >= targetThroughputRatio, math.IsNaN(three) || math.IsNaN(one)))
	}
	p("\n")
	// What bounds the produce ratios: with the load generator on the same
	// cores, a broker cheaper per byte buys only the cores it frees.
	for _, sc := range []string{produceOnly, produceTargetScheme} {
		st, kff := s.runs[sc]["strata"], s.runs[sc][kfakeFilesTarget]
		busy, lg, br := med(st, machineBusy), med(st, loadgenCores), med(st, func(r *loadgen.Result) float64 {
			if b := r.BrokerResources; b != nil && b.Sampled {
				return positive(b.CPUCoresMean)
			}
			return math.NaN()
		})
		if math.IsNaN(busy) {
			continue
		}
		kffBusy := "–"
		if v := med(kff, machineBusy); !math.IsNaN(v) {
			kffBusy = fmt.Sprintf("%.0f %%", v*100)
		}
		p("In %s the load generator used %s cores and Strata %s: together %.0f %% of the machine's cores (in kfake-files' runs %s). ",
			sc, fig(lg), fig(br), busy*100, kffBusy)
		lgGB := med(st, func(r *loadgen.Result) float64 {
			if l := r.LoadgenResources; l != nil {
				return positive(l.CPUSecondsPerGBProduced)
			}
			return math.NaN()
		})
		cores := med(st, func(r *loadgen.Result) float64 {
			if l := r.LoadgenResources; l != nil {
				return positive(float64(l.MachineCores))
			}
			return math.NaN()
		})
		if !math.IsNaN(lgGB) && !math.IsNaN(cores) {
			ceiling := cores / lgGB * 1000
			p("The load generator alone spends %s CPU-s per GB it produces, so even a broker that cost nothing would reach at most %s MB/s here, %s kfake-files' rate. ",
				fig(lgGB), fig(ceiling), ratio(ceiling, med(kff, mb)))
			// The broker's CPU per GB at which the target ratio fits on
			// these cores beside this load generator (all cores busy).
			if k := med(kff, mb); k > 0 {
				need := cores/(targetFilesRatio*k/1000) - lgGB
				if need > 0 {
					p("Reaching %.1f× kfake-files with every core busy would take a broker at %s CPU-s per GB or less (Strata: %s). ", targetFilesRatio, fig(need), fig(med(st, cpuPerGBProduced)))
				} else {
					p("%.1f× kfake-files does not fit on these cores beside this load generator, whatever the broker costs. ", targetFilesRatio)
				}
			}
		}
		p("\n\n")
		break
	}
}

// writeReplication is the page's replication summary: for each scenario
// run on three nodes, one node at RF=1, three at RF=3 and kfake side by
// side, and whether issue 14's targets were met.
func writeReplication(p func(string, ...any), s *resultSet) {
	var scs []string
	for _, sc := range s.scenarios() {
		if len(s.runs[sc][cluster3Target]) > 0 || s.failed(sc, cluster3Target) {
			scs = append(scs, sc)
		}
	}
	if len(scs) == 0 {
		return
	}
	p("## Replication: 3 nodes at RF=3\n\n")
	p("Three Strata nodes on this one machine (`scripts/cluster3`: combined mode, a controller quorum of three, all sharing its cores) with topics at replication factor 3, `min.insync.replicas=2`, acks=all, against one node at replication factor 1 and kfake in the same run. ")
	p("Targets: three nodes produce at least %.1f× one node's MB/s (%s), and the end-to-end p99 on three nodes is at most %.0f ms (%s).\n\n", targetThroughputRatio, replicatedThroughput, targetE2EP99Ms, replicatedE2E)
	p("| scenario | 1 node RF=1 produce MB/s | 3 nodes RF=3 produce MB/s | 3 nodes ÷ 1 node | kfake produce MB/s | 1 node e2e p99 (ms) | 3 nodes e2e p99 (ms) | kfake e2e p99 (ms) |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, sc := range scs {
		st, s3, kf := s.runs[sc]["strata"], s.runs[sc][cluster3Target], s.runs[sc]["kfake"]
		one, three := med(st, metrics[1].get), med(s3, metrics[1].get)
		p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", sc, fig(one), fig(three), ratio(three, one), fig(med(kf, metrics[1].get)),
			fig(med(st, metrics[7].get)), fig(med(s3, metrics[7].get)), fig(med(kf, metrics[7].get)))
	}
	p("\n")
	for _, sc := range scs {
		st, s3 := s.runs[sc]["strata"], s.runs[sc][cluster3Target]
		switch sc {
		case replicatedThroughput:
			one, three := med(st, metrics[1].get), med(s3, metrics[1].get)
			p("- %s: three nodes at RF=3 produce %s MB/s, %s of one node's %s MB/s (target ≥ %.1f×): %s.\n",
				sc, fig(three), ratio(three, one), fig(one), targetThroughputRatio, verdict(!math.IsNaN(one) && one > 0 && three/one >= targetThroughputRatio, math.IsNaN(three) || math.IsNaN(one)))
		case replicatedE2E:
			e2e := med(s3, metrics[7].get)
			rate := "–"
			if len(s3) > 0 && s3[0].Workload.Rate > 0 {
				rate = strconv.FormatInt(s3[0].Workload.Rate, 10)
			}
			p("- %s: end-to-end p99 on three nodes at RF=3 %s ms at %s records/s (target ≤ %.0f ms): %s.\n",
				sc, fig(e2e), rate, targetE2EP99Ms, verdict(e2e <= targetE2EP99Ms, math.IsNaN(e2e)))
		}
	}
	p("\n")
	writeGoBench(p, s)
}

// goBenchDoc says what each replication Go benchmark measures.
var goBenchDoc = map[string]string{
	"BenchmarkFollowerFetch":  "leader side: a follower's 1 MiB fetch over loopback (checks, follower state, HW; records by sendfile)",
	"BenchmarkFollowerAppend": "follower side: one fetched 16-record batch of 1 KiB records appended (CRC check, one write, producer state)",
}

// writeGoBench is the follower path's allocation figures, from the Go
// benchmarks bench/run ran (gobench.txt), medians of their runs.
func writeGoBench(p func(string, ...any), s *resultSet) {
	if len(s.goOrder) == 0 {
		return
	}
	p("The follower path's cost per operation, from Go benchmarks run in the same run (`go test -run '^$' -bench 'BenchmarkFollower(Fetch|Append)$' -benchmem ./broker`, median of %d runs each): allocations do not grow with the bytes moved.\n\n", len(s.gobench[s.goOrder[0]]))
	p("| benchmark | what | ns/op | MB/s | B/op | allocs/op |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, name := range s.goOrder {
		runs := s.gobench[name]
		get := func(f func(goBench) float64) float64 {
			vs := make([]float64, len(runs))
			for i, r := range runs {
				vs[i] = f(r)
			}
			return median(vs)
		}
		p("| %s | %s | %s | %s | %s | %s |\n", name, na(goBenchDoc[name]), fig(get(func(g goBench) float64 { return g.nsOp })),
			fig(get(func(g goBench) float64 { return g.mbS })), fig(get(func(g goBench) float64 { return g.bOp })), fig(get(func(g goBench) float64 { return g.allocsOp })))
	}
	p("\n")
}

// verdict says whether a target was met; unknown when it was not measured.
func verdict(met, unknown bool) string {
	switch {
	case unknown:
		return "not measured"
	case met:
		return "met"
	}
	return "**not met**"
}

// writeThreeWay is a scenario's table with one node, three nodes and
// kfake side by side.
func writeThreeWay(p func(string, ...any), st, s3, kf []*loadgen.Result) {
	p("| figure | Strata 1 node RF=1 | Strata 3 nodes RF=3 | kfake | 3 nodes ÷ 1 node | 1 node ÷ kfake |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	p("| successful runs | %d | %d | %d | | |\n", len(st), len(s3), len(kf))
	for _, mt := range metrics {
		a, b, c := med(st, mt.get), med(s3, mt.get), med(kf, mt.get)
		if math.IsNaN(a) && math.IsNaN(b) && math.IsNaN(c) {
			continue
		}
		name := mt.name
		if mt.unit != "" {
			name += " (" + mt.unit + ")"
		}
		if mt.count {
			p("| %s | %s | %s | %s | | |\n", name, count(a), count(b), count(c))
			continue
		}
		p("| %s | %s | %s | %s | %s | %s |\n", name, fig(a), fig(b), fig(c), ratio(b, a), ratio(a, c))
	}
	p("\n")
	if len(s3) > 0 {
		p("Broker CPU and RSS on three nodes are node 1's alone (the node `--metrics-url` names), not the three nodes' sum.\n\n")
	}
}

// writeScenario is one scenario's section: its workload, its table of
// figures (Strata and kfake, or one node, three nodes and kfake), notes
// and failed runs. seq and sf are the machine's sequential write and
// loopback sendfile MB/s.
func writeScenario(p func(string, ...any), s *resultSet, sc string, seq, sf float64) {
	st, kf, s3 := s.runs[sc]["strata"], s.runs[sc]["kfake"], s.runs[sc][cluster3Target]
	p("## %s\n\n", sc)
	if w := workloadLine(append(append([]*loadgen.Result{}, st...), kf...)); w != "" {
		p("%s\n\n", w)
	}
	if len(s3) > 0 {
		if w := workloadLine(s3); w != "" {
			p("On three nodes: %s\n\n", strings.TrimPrefix(w, "Workload: "))
		}
	}
	if len(st)+len(kf)+len(s3) == 0 {
		p("No successful run.\n\n")
	} else if len(s3) > 0 {
		writeThreeWay(p, st, s3, kf)
		notes(p, s.runs[sc])
	} else {
		// Strata, then each peer, then Strata ÷ each peer.
		peers := s.peers()
		cols := [][]*loadgen.Result{st}
		head, rule, runs, blank := "| figure | Strata", "| --- | ---:", fmt.Sprintf("| successful runs | %d", len(st)), ""
		for _, pe := range peers {
			cols = append(cols, s.runs[sc][pe])
			head += " | " + pe
			rule += " | ---:"
			runs += fmt.Sprintf(" | %d", len(s.runs[sc][pe]))
		}
		for _, pe := range peers {
			head += " | Strata ÷ " + pe
			rule += " | ---:"
			blank += " |"
		}
		p("%s |\n%s |\n%s |%s\n", head, rule, runs, blank)
		for _, mt := range metrics {
			vs := make([]float64, len(cols))
			some := false
			for i, c := range cols {
				vs[i] = med(c, mt.get)
				some = some || !math.IsNaN(vs[i])
			}
			if !some {
				continue
			}
			name := mt.name
			if mt.unit != "" {
				name += " (" + mt.unit + ")"
			}
			row := "| " + name
			for _, v := range vs {
				if mt.count {
					row += " | " + count(v)
				} else {
					row += " | " + fig(v)
				}
			}
			for _, v := range vs[1:] {
				if mt.count { // no ratio of counts
					row += " |"
				} else {
					row += " | " + ratio(vs[0], v)
				}
			}
			p("%s |\n", row)
		}
		if len(st) > 0 {
			smb := med(st, metrics[1].get)
			cmb := med(st, metrics[2].get)
			empty := strings.Repeat(" |", 2*len(peers))
			p("| Strata produce MB/s ÷ sequential write | %s |%s\n", pct(smb, seq), empty)
			if !math.IsNaN(cmb) {
				p("| Strata consume MB/s ÷ loopback sendfile | %s |%s\n", pct(cmb, sf), empty)
			}
		}
		p("\n")
		writeCatchUp(p, st, s.machines)
		writeCost(p, st)
		notes(p, s.runs[sc])
	}
	for _, f := range s.failures {
		if f.Scenario == sc {
			p("- failed: %s run %s: %s\n", f.Target, f.Run, oneLine(f.Reason))
		}
	}
	if s.failed(sc, "") {
		p("\n")
	}
}

// replicated reports whether sc ran (or failed) on three nodes.
func (s *resultSet) replicated(sc string) bool {
	return len(s.runs[sc][cluster3Target]) > 0 || s.failed(sc, cluster3Target)
}

// Markers around the replication block, so that bench/run can replace
// it alone (BENCH_DOC_SECTION=replication) in a page from a full run.
const (
	replicationBegin = "<!-- replication:begin -->"
	replicationEnd   = "<!-- replication:end -->"
)

// writeReplicationBlock is the replication summary, the follower path's
// Go benchmark figures and the replication scenarios' sections, between
// the markers.
func writeReplicationBlock(p func(string, ...any), s *resultSet, seq, sf float64) {
	var scs []string
	for _, sc := range s.scenarios() {
		if s.replicated(sc) {
			scs = append(scs, sc)
		}
	}
	if len(scs) == 0 {
		return
	}
	p("%s\n", replicationBegin)
	writeReplication(p, s)
	for _, sc := range scs {
		writeScenario(p, s, sc, seq, sf)
	}
	p("%s\n\n", replicationEnd)
}

// Markers around the transactions block (BENCH_DOC_SECTION=transactions).
const (
	transactionsBegin = "<!-- transactions:begin -->"
	transactionsEnd   = "<!-- transactions:end -->"
)

// writeTransactionsBlock is issue 16's figures between their markers:
// transactional produce MB/s as a ratio to idempotent produce of the same
// workload in the same run, and the read_committed end-to-end p99 beside
// the read_uncommitted one, on Strata and kfake; then the scenarios'
// sections.
func writeTransactionsBlock(p func(string, ...any), s *resultSet, seq, sf float64) {
	var scs []string
	for _, sc := range s.scenarios() {
		if transactional(sc) {
			scs = append(scs, sc)
		}
	}
	if len(scs) == 0 {
		return
	}
	p("%s\n", transactionsBegin)
	p("## Transactions\n\n")
	p("Transactional producers (a transactional id each, a commit every 100 ms: flush, EndTxn, BeginTransaction) against the same workload with idempotent producers in the same run, on one node; the end-to-end latency of read_committed consumers, whose records become visible at their transaction's commit marker, beside read_uncommitted ones of idempotent producers at the same rate.\n\n")
	p("| figure | Strata | kfake |\n| --- | ---: | ---: |\n")
	for _, tg := range []struct {
		name    string
		a, b    string
		get     func(*loadgen.Result) float64
		isRatio bool
	}{
		{"idempotent produce MB/s (" + replicatedThroughput + ")", replicatedThroughput, "", metrics[1].get, false},
		{"transactional produce MB/s (" + txnThroughput + ")", txnThroughput, "", metrics[1].get, false},
		{"transactional ÷ idempotent", txnThroughput, replicatedThroughput, metrics[1].get, true},
		{"transactions committed per second (" + txnThroughput + ")", txnThroughput, "", func(r *loadgen.Result) float64 {
			if r.Duration <= 0 {
				return math.NaN()
			}
			return positive(float64(r.Produce.TxnCommits) / r.Duration)
		}, false},
		{"end-to-end p99 ms, read_uncommitted, idempotent (" + replicatedE2E + ")", replicatedE2E, "", metrics[7].get, false},
		{"end-to-end p99 ms, read_committed (" + txnE2E + ")", txnE2E, "", metrics[7].get, false},
	} {
		cell := func(target string) string {
			a := med(s.runs[tg.a][target], tg.get)
			if !tg.isRatio {
				return fig(a)
			}
			return ratio(a, med(s.runs[tg.b][target], tg.get))
		}
		p("| %s | %s | %s |\n", tg.name, cell("strata"), cell("kfake"))
	}
	p("\n")
	for _, sc := range scs {
		writeScenario(p, s, sc, seq, sf)
	}
	p("%s\n\n", transactionsEnd)
}

// writeSection is the replication block alone, saying which run it comes
// from (bench/run with BENCH_DOC_SECTION=replication puts it in a page of
// an earlier full run).
func writeSection(w io.Writer, m meta, s *resultSet) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	seq := median(collect(s.machines, func(x *loadgen.Machine) float64 { return x.SeqWriteMBPerSec }))
	sf := median(collect(s.machines, func(x *loadgen.Machine) float64 { return x.LoopbackSendfileMBs }))
	var b strings.Builder
	writeReplicationBlock(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }, s, seq, sf)
	block := b.String()
	if block == "" {
		p("%s\nNo replication scenario ran.\n%s\n", replicationBegin, replicationEnd)
		return
	}
	// The run it comes from, right after the begin marker.
	block = strings.Replace(block, replicationBegin+"\n", fmt.Sprintf("%s\n<!-- Generated by bench/run (bench/mkreport -section replication) from %s; do not edit by hand. -->\n\n", replicationBegin, m.Results), 1)
	block = strings.Replace(block, "against one node at replication factor 1 and kfake in the same run. ",
		fmt.Sprintf("against one node at replication factor 1 and kfake in the same run (a run of the replication scenarios alone: %s, commit %s, %s, %s, %d repetitions). ",
			na(m.Date), na(m.Commit), na(m.Host), na(m.Duration), m.Runs), 1)
	p("%s", block)
}

// rawGet is the median raw ranged GET rate of the machine measurements
// that have one (the MinIO the catch-up read from, in the same run), how
// many had one and their bytes per GET.
func rawGet(ms []*loadgen.Machine) (mbs float64, n int, chunk int64) {
	var gs []float64
	for _, m := range ms {
		if m.S3Get != nil && m.S3Get.MBPerSec > 0 {
			gs = append(gs, m.S3Get.MBPerSec)
			chunk = m.S3Get.ChunkBytes
		}
	}
	if len(gs) == 0 {
		return math.NaN(), 0, 0
	}
	return median(gs), len(gs), chunk
}

// sizeName writes a byte count in binary units (4 MiB).
func sizeName(b int64) string {
	switch {
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// writeCatchUp is the catch-up line: the read, the producers' p99 alone
// and during it from the same runs, and, when the runs read from an
// object store whose raw ranged GET the machine measurement took in the
// same run (MinIO), the read as a share of it, with the remote reader's
// GETs per GiB and chunk-cache hit ratio.
func writeCatchUp(p func(string, ...any), st []*loadgen.Result, ms []*loadgen.Machine) {
	var cs []*loadgen.Result
	for _, r := range st {
		if r.CatchUp != nil {
			cs = append(cs, r)
		}
	}
	if len(cs) == 0 {
		return
	}
	get := func(f func(*loadgen.CatchUp) float64) string {
		return fig(med(cs, func(r *loadgen.Result) float64 { return f(r.CatchUp) }))
	}
	never := 0
	for _, r := range cs {
		if r.CatchUp.CaughtUpSeconds < 0 {
			never++
		}
	}
	backend := ""
	for _, r := range cs {
		if r.Cost != nil && r.Cost.Backend != "" {
			backend = r.Cost.Backend
		}
	}
	from := ""
	if backend != "" {
		from = ", remote store " + backend
	}
	p("Catch-up (Strata%s, median of %d): backlog %s MB, caught up after %s s (%d of %d runs never caught up), read %s MB/s, producer p99 %s ms alone → %s ms during (×%s).\n\n",
		from, len(cs),
		get(func(c *loadgen.CatchUp) float64 { return float64(c.BacklogBytes) / 1e6 }),
		fig(med(cs, func(r *loadgen.Result) float64 {
			if r.CatchUp.CaughtUpSeconds < 0 {
				return math.NaN()
			}
			return r.CatchUp.CaughtUpSeconds
		})),
		never, len(cs),
		get(func(c *loadgen.CatchUp) float64 { return c.ReadMBPerSec }),
		get(func(c *loadgen.CatchUp) float64 { return c.ProducerP99Before }),
		get(func(c *loadgen.CatchUp) float64 { return c.ProducerP99During }),
		get(func(c *loadgen.CatchUp) float64 { return c.ProducerP99Increase }))
	bb := med(cs, func(r *loadgen.Result) float64 { return positive(r.CatchUp.BrokerProduceP99Before) })
	bd := med(cs, func(r *loadgen.Result) float64 { return positive(r.CatchUp.BrokerProduceP99During) })
	if !math.IsNaN(bb) && !math.IsNaN(bd) {
		p("Inside the broker (its produce request latency, the same phases): p99 %s ms alone → %s ms during (×%s); the rest of the producers' p99 is the client's own.\n\n",
			fig(bb), fig(bd), fig(med(cs, func(r *loadgen.Result) float64 {
				return positive(r.CatchUp.BrokerProduceP99During) / positive(r.CatchUp.BrokerProduceP99Before)
			})))
	}
	cost := func(f func(*loadgen.Cost) float64) float64 {
		return med(cs, func(r *loadgen.Result) float64 {
			if r.Cost == nil {
				return math.NaN()
			}
			return positive(f(r.Cost))
		})
	}
	gets := cost(func(c *loadgen.Cost) float64 { return c.RemoteGetsPerGiBRead })
	hit := cost(func(c *loadgen.Cost) float64 { return c.CacheHitRatio })
	raw, n, chunk := rawGet(ms)
	if math.IsNaN(gets) && math.IsNaN(hit) && n == 0 {
		return
	}
	p("Remote reads: %s GETs per GiB read from the remote tier, chunk-cache hit ratio %s", fig(gets), fig(hit))
	if n > 0 && s3Backend(backend) {
		rd := med(cs, func(r *loadgen.Result) float64 { return r.CatchUp.ReadMBPerSec })
		first := med(cs, func(r *loadgen.Result) float64 { return positive(r.CatchUp.ReadMBPerSecFirst) })
		p("; a raw ranged GET (one stream, %s per GET) from the same object store in the same run: %s MB/s (median of %d), so catch-up ÷ raw GET = %s", sizeName(chunk), fig(raw), n, ratio(rd, raw))
		if !math.IsNaN(first) {
			p(" (%s from the consumers' first record: %s MB/s, without the group join)", ratio(first, raw), fig(first))
		}
	}
	p(".\n\n")
}

// s3Backend reports whether the catch-up's remote store was the S3 one
// the raw GET measured (an fs store's catch-up is not held against it).
func s3Backend(b string) bool { return strings.Contains(b, "s3") }

func writeCost(p func(string, ...any), st []*loadgen.Result) {
	var cs []*loadgen.Result
	for _, r := range st {
		if r.Cost != nil {
			cs = append(cs, r)
		}
	}
	if len(cs) == 0 {
		return
	}
	get := func(f func(*loadgen.Cost) float64) string {
		return fig(med(cs, func(r *loadgen.Result) float64 { return f(r.Cost) }))
	}
	perGiB := med(cs, func(r *loadgen.Result) float64 {
		b := r.Cost.BytesProduced // what the cost covers; older results: the measured phase
		if b <= 0 {
			b = r.Produce.Bytes
		}
		gib := float64(b) / (1 << 30)
		if !(gib > 0) {
			return math.NaN()
		}
		return r.Cost.EstimatedCostUSD / gib
	})
	p("Object store (Strata, median of %d): %s PUTs and %s GETs per run, %s PUTs per GiB produced, %s GETs per GiB consumed, request cost $%s per run, $%s per GiB produced.\n\n",
		len(cs), get(func(c *loadgen.Cost) float64 { return c.Puts }), get(func(c *loadgen.Cost) float64 { return c.Gets }),
		get(func(c *loadgen.Cost) float64 { return c.PutsPerGiBIn }), get(func(c *loadgen.Cost) float64 { return c.GetsPerGiBOut }),
		get(func(c *loadgen.Cost) float64 { return c.EstimatedCostUSD }), fig(perGiB))
}

// workloadLine describes the workload of the first run, the shape that
// decides the figures, and the measured phase actually run (median).
func workloadLine(runs []*loadgen.Result) string {
	if len(runs) == 0 {
		return ""
	}
	w := runs[0].Workload
	size := w.RecordSize.Size
	if size == "" && w.RecordSize.Min != "" {
		size = w.RecordSize.Min + "–" + w.RecordSize.Max
	}
	rate := "as fast as acknowledged"
	if w.Rate > 0 {
		rate = strconv.FormatInt(w.Rate, 10) + " records/s"
	}
	phase := "measured " + fig(med(runs, func(r *loadgen.Result) float64 { return positive(r.Duration) })) + " s (median)"
	if w.FillBytes != "" {
		phase = "writing " + w.FillBytes + ", " + phase
	}
	return fmt.Sprintf("Workload: %d partitions, %s records (%s), compression %s, acks %s, producers %d, consumers %d, rate %s, warm-up %s, %s.",
		w.Partitions, na(size), na(w.RecordSize.Kind), na(w.Compression), na(w.Acks), w.Producers, w.Consumers, rate, na(w.Warmup), phase)
}

// notes lists the notes and errors the runs reported, grouped by their
// wording with the numbers left out (one example shown), with the target
// and how many runs said each: what the tables cannot show (a remote tier
// that never filled, a reader that never caught up).
func notes(p func(string, ...any), byTarget map[string][]*loadgen.Result) {
	targets := make([]string, 0, len(byTarget))
	for t := range byTarget {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	wrote := false
	for _, t := range targets {
		var order []string
		example := map[string]string{}
		runs := map[string]int{}
		for _, r := range byTarget[t] {
			said := map[string]bool{}
			for _, n := range append(append([]string{}, r.Notes...), r.Errors...) {
				n = oneLine(n)
				k := digits.ReplaceAllString(n, "#")
				if _, ok := example[k]; !ok {
					order = append(order, k)
					example[k] = n
				}
				if !said[k] {
					said[k] = true
					runs[k]++
				}
			}
		}
		for _, k := range order {
			p("- %s, %d of %d runs: %s\n", t, runs[k], len(byTarget[t]), example[k])
			wrote = true
		}
	}
	if wrote {
		p("\n")
	}
}

var digits = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

func collect(ms []*loadgen.Machine, f func(*loadgen.Machine) float64) []float64 {
	out := make([]float64, len(ms))
	for i, m := range ms {
		out[i] = f(m)
	}
	return out
}

// fig formats a figure with three significant digits (at least the
// integer part); "–" when not measured.
func fig(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "–"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1 || v == 0:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default: // three significant digits, never an exponent
		return strconv.FormatFloat(v, 'f', 2-int(math.Floor(math.Log10(a))), 64)
	}
}

// count formats a median count (a half when two runs straddle it).
func count(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || !(b > 0) {
		return "–"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}

func pct(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || !(b > 0) {
		return "–"
	}
	return strconv.FormatFloat(100*a/b, 'f', 1, 64) + " %"
}

func na(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// oneLine keeps a failure reason to one table-safe line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
