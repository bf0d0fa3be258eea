// Package report renders a load-generator [loadgen.Result] as one
// self-contained HTML file: a summary table, the workload as run, the
// throughput stability, the broker's resources (or why they were not
// sampled), the catch-up, cost and machine-limit sections when present,
// the environment, the errors, and six charts drawn as inline SVG by Go
// code (throughput, latency percentile distribution, p99 over time,
// consumer lag, errors per second, broker CPU and memory).
//
// It owns the presentation of results and nothing else: it reads a Result,
// it never measures, never changes one, and never talks to a cluster. The
// file it writes must open offline: it must never reference a remote
// resource (no CDN, no web font, no script at all), and it must never emit
// a string from the Result unescaped (every such string goes through
// html/template).
//
// Usage:
//
//	f, _ := os.Create("run.html")
//	defer f.Close()
//	if err := report.WriteHTML(f, result); err != nil { ... }
//
// Each chart is an <svg data-chart="throughput|latency-distribution|
// latency-over-time|lag|errors|broker-resources">; a chart without data
// says "no data" (and why, when it knows) inside its frame. Every series has its own stroke colour, unique across the page
// and listed in [Palette], so a screenshot can tell the charts apart.
package report
