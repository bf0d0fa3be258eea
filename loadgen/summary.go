package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// WriteSummary prints the final table of a result: throughput and the
// latency percentiles of each side, then catch-up, cost, notes and errors.
func WriteSummary(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "%s against %s (%s), %.1fs measured\n", r.Scenario, joinBrokers(r.Brokers), r.Target, r.Duration)
	fmt.Fprintln(tw, "\trecords\trecords/s\tMB/s\terrors\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tp99.99 ms\tmax ms\t")
	row := func(name string, s Summary, l Latency) {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n",
			name, s.Records, s.RecordsPerSec, s.MBPerSec, s.Errors, l.P50, l.P90, l.P99, l.P999, l.P9999, l.Max)
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
			first = fmt.Sprintf(" (first record after %.1fs)", c.FirstRecordSeconds)
		}
		fmt.Fprintf(w, "catch-up: backlog %d records (%.1f MB), caught up in %s%s, read %.1f MB/s, producer p99 %.2f ms alone, %.2f ms during (×%.2f)\n",
			c.BacklogRecords, float64(c.BacklogBytes)/1e6, caught, first, c.ReadMBPerSec, c.ProducerP99Before, c.ProducerP99During, c.ProducerP99Increase)
	}
	if c := r.Cost; c != nil {
		fmt.Fprintf(w, "object store: %.0f PUTs (%.1f per GiB produced), %.0f GETs (%.1f per GiB consumed), %.0f LISTs, %.0f DELETEs, %.1f MB put, %.1f MB got; est. $%.6f at $%g/1000 PUT, $%g/1000 GET\n",
			c.Puts, c.PutsPerGiBIn, c.Gets, c.GetsPerGiBOut, c.Lists, c.Deletes, c.BytesPut/1e6, c.BytesGot/1e6, c.EstimatedCostUSD, c.PricePerKPut, c.PricePerKGet)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	return nil
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
		line(prefix+" p90 ms", x.P90, y.P90)
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
	return tw.Flush()
}
