// Command faultmatrix prints the replication fault matrix (issue 14) as a
// markdown table from the JSON lines the fault tests append to
// STRATA_TEST_FAULT_REPORT (one deliverycheck.FaultResult per test run):
// rows = faults, merged over every run of the same fault, columns = runs,
// records acknowledged, acknowledged lost, duplicates, inconsistent
// offsets, other anomalies, re-election p50/p99, ISR recovery p50/p99.
//
// It never runs a test and never invents a figure: a fault with no
// timing shows "–". bench/faults calls it:
//
//	go run ./bench/faultmatrix results.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/strata-io/strata/internal/deliverycheck"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: faultmatrix results.jsonl")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultmatrix:", err)
		os.Exit(1)
	}
	defer f.Close()
	if err := matrix(f, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "faultmatrix:", err)
		os.Exit(1)
	}
}

// matrix reads FaultResult lines from r and writes the merged table to w,
// rows in order of each fault's first appearance.
func matrix(r io.Reader, w io.Writer) error {
	var order []string
	rows := map[string]*deliverycheck.FaultResult{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var fr deliverycheck.FaultResult
		if err := json.Unmarshal(sc.Bytes(), &fr); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		row := rows[fr.Fault]
		if row == nil {
			row = &deliverycheck.FaultResult{Fault: fr.Fault}
			rows[fr.Fault] = row
			order = append(order, fr.Fault)
		}
		row.Merge(fr)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Fprintln(w, deliverycheck.MatrixHeader())
	for _, f := range order {
		fmt.Fprintln(w, rows[f].Row())
	}
	return nil
}
