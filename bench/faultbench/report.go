// Package faultbench is Strata's fault matrix (issue 15): a local cluster
// of three strata processes on 127.0.0.2-4, `strata loadgen verify` run
// against it as a separate process, and one fault injected into each
// run — kill -9 of a partition leader, SIGSTOP of it past
// broker.session.timeout.ms, a network partition isolating it (iptables
// rules on lo between the nodes' addresses), kill -9 of the controller
// quorum's leader, a rolling restart, a full disk on one node (a tmpfs
// filled to ENOSPC) and an outage of the object store (MinIO stopped)
// under a tiered topic. Per fault it records what verify found (records
// acknowledged, lost, duplicated, other anomalies), the re-election time
// (fault → a new leader in the metadata of a surviving node) and the ISR
// recovery time (heal → every replica back in the ISR).
//
// The matrix is a test, TestFaultMatrix, so that the suite runs it once
// per fault with fast timeouts (a regression in any cell fails CI), and
// bench/faults runs it with more runs and Kafka's default timeouts and
// writes docs/reliability.md from its results. This file is the pure
// part: the results and the page.
package faultbench

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/strata-io/strata/internal/deliverycheck"
)

// Result is one fault's row: what every run of it observed.
type Result struct {
	deliverycheck.FaultResult
	// Failed and Unknown are the sends verify saw fail or time out
	// (neither acknowledged nor lost: the producer was told).
	Failed  int `json:"failed"`
	Unknown int `json:"unknown"`
	// NoVerdict counts runs in which verify reached no verdict (the
	// cluster did not come back, the final read did not finish).
	NoVerdict int `json:"no_verdict"`
	// ExpectElection: the fault takes a leader away, so each run must
	// show a re-election; otherwise a leader change is only counted
	// (LeaderChanges) and the cell says whether any happened.
	ExpectElection bool `json:"expect_election"`
	LeaderChanges  int  `json:"leader_changes"`
	// ISRShrinks counts runs in which some partition's ISR lost a
	// replica; a fault that needs no recovery shows "never shrank".
	ISRShrinks int `json:"isr_shrinks"`
	// ISRNote, when set, is the ISR cell of a fault without recovery
	// timings (one whose ISR is whole by construction when it ends).
	ISRNote string   `json:"isr_note,omitempty"`
	Notes   []string `json:"notes,omitempty"`
	// Skipped is why the fault was not run (a missing part: root for
	// iptables and mount, MinIO); "" when it ran.
	Skipped string `json:"skipped,omitempty"`
}

// Header is the page's table header.
func Header() string {
	return "| fault | runs | acknowledged | lost | duplicated | inconsistent offsets | other anomalies | failed / unknown sends | re-election p50 / max | ISR recovery p50 / max |\n" +
		"|---|---|---|---|---|---|---|---|---|---|"
}

// Row is r as a table row. Every cell has a figure or says why not.
func (r *Result) Row() string {
	if r.Skipped != "" {
		return fmt.Sprintf("| %s | not run: %s | | | | | | | | |", r.Fault, r.Skipped)
	}
	runs := fmt.Sprint(r.Runs)
	if r.NoVerdict > 0 {
		runs = fmt.Sprintf("%d (%d without a verdict)", r.Runs, r.NoVerdict)
	}
	return fmt.Sprintf("| %s | %s | %d | %d | %d | %d | %d | %d / %d | %s | %s |", r.Fault, runs, r.Acked, r.Lost,
		r.Duplicates, r.Inconsistent, r.Other, r.Failed, r.Unknown, r.reelectionCell(), r.isrCell())
}

func (r *Result) reelectionCell() string {
	switch {
	case len(r.Reelection) > 0:
		return spread(r.Reelection)
	case r.ExpectElection:
		return "no new leader seen"
	case r.LeaderChanges == 0:
		return "none needed (leaders kept)"
	default:
		return fmt.Sprintf("%d leader changes", r.LeaderChanges)
	}
}

func (r *Result) isrCell() string {
	switch {
	case len(r.ISRRecovery) > 0:
		return spread(r.ISRRecovery)
	case r.ISRNote != "":
		return r.ISRNote
	case r.ISRShrinks == 0:
		return "never shrank"
	default:
		return "did not recover"
	}
}

// spread is "p50 / max (samples)" of ds: with a handful of runs a p99
// would be the maximum under another name.
func spread(ds []time.Duration) string {
	return fmt.Sprintf("%v / %v (%d)", round(deliverycheck.Percentile(ds, 50)), round(deliverycheck.Percentile(ds, 100)), len(ds))
}

func round(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(10 * time.Millisecond)
}

// Clean reports whether r is a pass: nothing acknowledged lost, no
// duplicate, no other anomaly, a verdict in every run, and a re-election
// in every run of a fault that needs one.
func (r *Result) Clean() bool {
	return r.Skipped != "" || r.Lost == 0 && r.Duplicates == 0 && r.Inconsistent == 0 && r.Other == 0 &&
		r.NoVerdict == 0 && (!r.ExpectElection || len(r.Reelection) >= r.Runs)
}

// Page is docs/reliability.md.
type Page struct {
	Generated   time.Time
	Commit      string // git describe of the tree the binary was built from
	Machine     string // CPU, cores, memory, kernel
	Profile     string // the timeouts' profile name and its settings
	Settings    []string
	Workload    string // the verify command line's workload part
	Results     []*Result
	Description map[string]string // fault → how it is injected and healed
}

// Write renders p as markdown.
func (p *Page) Write(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Reliability: the fault matrix\n\n")
	b.WriteString("<!-- Generated by bench/faults (bench/faultbench); do not edit by hand. -->\n\n")
	b.WriteString("Three `strata serve` processes (combined broker and controller, node i on 127.0.0.(i+1)) and " +
		"`strata loadgen verify` as a separate process: idempotent acks=all producers of self-describing records, " +
		"a consumer group of two members and a group-less reader of every partition, then a final read of every " +
		"partition checked for lost, duplicated and reordered records, inconsistent offsets, non-monotonic polls and " +
		"reads of failed sends. One fault is injected into each run while the load goes on, healed, and the load goes " +
		"on after the heal before verify stops producing.\n\n")
	fmt.Fprintf(&b, "- Generated: %s\n", p.Generated.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "- Commit: `%s`\n", p.Commit)
	fmt.Fprintf(&b, "- Machine: %s\n", p.Machine)
	fmt.Fprintf(&b, "- Timeouts: %s\n", p.Profile)
	fmt.Fprintf(&b, "- Cluster settings: `%s`\n", strings.Join(p.Settings, "`, `"))
	fmt.Fprintf(&b, "- Workload: %s\n\n", p.Workload)
	b.WriteString(Header() + "\n")
	for _, r := range p.Results {
		b.WriteString(r.Row() + "\n")
	}
	b.WriteString("\nTimes are the median and the maximum, with the number of samples. Re-election: from the fault to a leader other than the faulted node for every partition it led, " +
		"in the metadata of a surviving node (for the controller: to another quorum leader in its metrics; for the " +
		"rolling restart: from SIGTERM, with controlled shutdown, per node). ISR recovery: from the heal (restart, " +
		"SIGCONT, rules removed, space freed, store back) to every replica of every partition back in the ISR. " +
		"Failed / unknown sends were refused or timed out and the producer was told: they may or may not be in the " +
		"log, and verify checks only that a failed one is never read.\n\n")
	b.WriteString("## The faults\n\n")
	for _, r := range p.Results {
		fmt.Fprintf(&b, "- **%s**: %s\n", r.Fault, p.Description[r.Fault])
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  - %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
