package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// WriteSummary prints the final table of a result: throughput and the
// latency percentiles of each side, then catch-up, cost, notes and errors.
func WriteSummary(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "%s against %s (%s), %.1fs measured\n", r.Scenario, joinBrokers(r.Brokers), r.Target, r.Duration)
	if e := r.Environment; e != nil {
		fmt.Fprintf(w, "environment: %s\n", EnvironmentLine(e))
	}
	fmt.Fprintln(tw, "\trecords\trecords/s\tMB/s\terrors\tp50 ms\tp75 ms\tp90 ms\tp95 ms\tp99 ms\tp99.9 ms\tp99.99 ms\tmax ms\t")
	row := func(name string, s Summary, l Latency) {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n",
			name, s.Records, s.RecordsPerSec, s.MBPerSec, s.Errors, l.P50, l.P75, l.P90, l.P95, l.P99, l.P999, l.P9999, l.Max)
	}
	row("publish", r.Produce, r.Produce.Latency)
	if r.Consume.Records > 0 || r.EndToEnd.Count > 0 {
		row("end-to-end", r.Consume, r.EndToEnd)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c := r.CatchUp; c != nil {
		caught := "never"
		if c.CaughtUpSeconds >= 0 {
			caught = fmt.Sprintf("%.1fs", c.CaughtUpSeconds)
		}
		first := ""
		if c.FirstRecordSeconds > 0 {
			first = fmt.Sprintf(" (first record after %.1fs, then %.1f MB/s)", c.FirstRecordSeconds, c.ReadMBPerSecFirst)
		}
		fmt.Fprintf(w, "catch-up: backlog %d records (%.1f MB), caught up in %s%s, read %.1f MB/s, producer p99 %.2f ms alone, %.2f ms during (×%.2f)\n",
			c.BacklogRecords, float64(c.BacklogBytes)/1e6, caught, first, c.ReadMBPerSec, c.ProducerP99Before, c.ProducerP99During, c.ProducerP99Increase)
	}
	if st := r.Stability; st != nil {
		rates := func(name string, x Rates) {
			if x.Samples > 0 {
				fmt.Fprintf(w, "stability %s: %d s, records/s min %.0f mean %.0f max %.0f stddev %.0f (cv %.3f), MB/s min %.2f mean %.2f stddev %.2f\n",
					name, x.Samples, x.MinRecordsPerSec, x.MeanRecordsPerSec, x.MaxRecordsPerSec, x.StddevRecordsPerSec, x.CV, x.MinMBPerSec, x.MeanMBPerSec, x.StddevMBPerSec)
			}
		}
		rates("produce", st.Produce)
		rates("consume", st.Consume)
	}
	if b := r.BrokerResources; b != nil {
		if b.Sampled {
			fmt.Fprintf(w, "broker: CPU %.2f cores mean, %.2f max; RSS %.1f MB mean, %.1f MB max (%d samples of %s)\n",
				b.CPUCoresMean, b.CPUCoresMax, b.RSSBytesMean/1e6, b.RSSBytesMax/1e6, b.Samples, b.MetricsURL)
			if b.CPUSeconds > 0 {
				fmt.Fprintf(w, "broker CPU: %.2f CPU-seconds in the measured phase, %s per GB produced, %s per GB consumed\n",
					b.CPUSeconds, perGB(b.CPUSecondsPerGBProduced), perGB(b.CPUSecondsPerGBConsumed))
			}
		} else {
			fmt.Fprintf(w, "broker: CPU and memory not sampled: %s\n", b.Reason)
		}
	}
	if l := r.LoadgenResources; l != nil {
		both := ""
		if b := r.BrokerResources; b != nil && b.Sampled && b.CPUCoresMean > 0 {
			both = fmt.Sprintf("; with the broker %.2f of the machine's %d cores", l.CPUCoresMean+b.CPUCoresMean, l.MachineCores)
		}
		fmt.Fprintf(w, "loadgen: CPU %.2f cores mean, %s per GB produced%s\n", l.CPUCoresMean, perGB(l.CPUSecondsPerGBProduced), both)
	}
	if c := r.Cost; c != nil {
		fmt.Fprintf(w, "object store: %.0f PUTs (%.1f per GiB produced), %.0f GETs (%.1f per GiB consumed), %.0f LISTs, %.0f DELETEs, %.1f MB put, %.1f MB got; est. $%.6f at $%g/1000 PUT, $%g/1000 GET\n",
			c.Puts, c.PutsPerGiBIn, c.Gets, c.GetsPerGiBOut, c.Lists, c.Deletes, c.BytesPut/1e6, c.BytesGot/1e6, c.EstimatedCostUSD, c.PricePerKPut, c.PricePerKGet)
		if c.RemoteReadBytes > 0 {
			fmt.Fprintf(w, "remote reads: %.1f MB returned to fetches, %.0f GETs (%.1f per GiB read), chunk cache hit ratio %.2f\n",
				c.RemoteReadBytes/1e6, c.RemoteGets, c.RemoteGetsPerGiBRead, c.CacheHitRatio)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	return nil
}

// EnvironmentLine is an Environment in one line: both builds, the
// machine, the cluster and the settings that matter.
func EnvironmentLine(e *Environment) string {
	broker := e.BrokerBuild
	if e.Broker != nil {
		broker = fmt.Sprintf("%s (%s)", e.Broker.Version, shortCommit(e.Broker.Commit))
	}
	return fmt.Sprintf("loadgen %s (%s), broker %s; %s, %d cores, %.1f GiB, %s/%s kernel %s; cluster %s, %d brokers, rf %d, acks %s, compression %s",
		e.Loadgen.Version, shortCommit(e.Loadgen.Commit), broker, orUnknown(e.CPUModel), e.CPUCores, float64(e.MemoryBytes)/(1<<30),
		e.OS, e.Arch, orUnknown(e.Kernel), orUnknown(e.ClusterID), e.Brokers, e.ReplicationFactor, e.Acks, e.Compression)
}

func shortCommit(c string) string {
	if len(c) > 12 && !strings.HasSuffix(c, "-dirty") {
		return c[:12]
	}
	if len(c) > 18 {
		return c[:12] + "-dirty"
	}
	return orUnknown(c)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func joinBrokers(b []string) string {
	s := ""
	for i, x := range b {
		if i > 0 {
			s += ","
		}
		s += x
	}
	return s
}

// WriteJSON writes r as indented JSON.
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadResult reads a JSON result file.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("loadgen: %s: %w", path, err)
	}
	if r.Version < 1 {
		return nil, fmt.Errorf("loadgen: %s: not a loadgen result (no version)", path)
	}
	return &r, nil
}

// Compare prints the ratios b/a of two results: records/s, MB/s and each
// latency percentile of publish, consume and end to end. A ratio above 1
// means b is higher (faster for throughput, slower for latency).
func Compare(w io.Writer, a, b *Result, nameA, nameB string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, x := range []struct {
		name string
		r    *Result
	}{{nameA, a}, {nameB, b}} {
		if x.r.Environment != nil {
			fmt.Fprintf(w, "%s: %s\n", x.name, EnvironmentLine(x.r.Environment))
		} else {
			fmt.Fprintf(w, "%s: result version %d, no environment recorded\n", x.name, x.r.Version)
		}
	}
	fmt.Fprintf(tw, "metric\t%s\t%s\tb/a\t\n", nameA, nameB)
	line := func(name string, x, y float64) {
		ratio := "-"
		if x != 0 {
			ratio = fmt.Sprintf("%.3f", y/x)
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%s\t\n", name, x, y, ratio)
	}
	lat := func(prefix string, x, y Latency) {
		line(prefix+" p50 ms", x.P50, y.P50)
		line(prefix+" p75 ms", x.P75, y.P75)
		line(prefix+" p90 ms", x.P90, y.P90)
		line(prefix+" p95 ms", x.P95, y.P95)
		line(prefix+" p99 ms", x.P99, y.P99)
		line(prefix+" p99.9 ms", x.P999, y.P999)
		line(prefix+" p99.99 ms", x.P9999, y.P9999)
		line(prefix+" max ms", x.Max, y.Max)
	}
	line("produce records/s", a.Produce.RecordsPerSec, b.Produce.RecordsPerSec)
	line("produce MB/s", a.Produce.MBPerSec, b.Produce.MBPerSec)
	lat("publish", a.Produce.Latency, b.Produce.Latency)
	line("consume records/s", a.Consume.RecordsPerSec, b.Consume.RecordsPerSec)
	line("consume MB/s", a.Consume.MBPerSec, b.Consume.MBPerSec)
	lat("end-to-end", a.EndToEnd, b.EndToEnd)
	// Version 2 figures, when both results have them.
	if a.Stability != nil && b.Stability != nil {
		line("produce records/s min", a.Stability.Produce.MinRecordsPerSec, b.Stability.Produce.MinRecordsPerSec)
		line("produce records/s stddev", a.Stability.Produce.StddevRecordsPerSec, b.Stability.Produce.StddevRecordsPerSec)
		line("produce records/s cv", a.Stability.Produce.CV, b.Stability.Produce.CV)
		line("consume records/s min", a.Stability.Consume.MinRecordsPerSec, b.Stability.Consume.MinRecordsPerSec)
		line("consume records/s stddev", a.Stability.Consume.StddevRecordsPerSec, b.Stability.Consume.StddevRecordsPerSec)
	}
	line("produce errors", float64(a.Produce.Errors), float64(b.Produce.Errors))
	line("consume errors", float64(a.Consume.Errors), float64(b.Consume.Errors))
	if x, y := a.BrokerResources, b.BrokerResources; x != nil && y != nil && x.Sampled && y.Sampled {
		line("broker CPU cores mean", x.CPUCoresMean, y.CPUCoresMean)
		line("broker CPU cores max", x.CPUCoresMax, y.CPUCoresMax)
		line("broker RSS MB max", x.RSSBytesMax/1e6, y.RSSBytesMax/1e6)
		if a.Produce.MBPerSec > 0 && b.Produce.MBPerSec > 0 && x.CPUCoresMean > 0 && y.CPUCoresMean > 0 {
			line("produce MB/s per broker core", a.Produce.MBPerSec/x.CPUCoresMean, b.Produce.MBPerSec/y.CPUCoresMean)
		}
	}
	return tw.Flush()
}

// perGB is a CPU-seconds-per-GB figure, or "–" when that side moved
// nothing.
func perGB(v float64) string {
	if v > 0 {
		return fmt.Sprintf("%.3f s", v)
	}
	return "–"
}
