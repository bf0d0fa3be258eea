package main

import (
	"io"

	"github.com/strata-io/strata/loadgen"
)

// writeHTML renders `strata loadgen run --html`: loadgen/report.WriteHTML
// once that package has landed; nil until then (--html is refused with a
// one-line error).
var writeHTML func(io.Writer, *loadgen.Result) error

func init() {
	addCommand(command{
		name:    "loadgen",
		summary: "drive a Kafka-protocol cluster: workloads, latency, throughput, cost",
		run: func(args []string, stdout, stderr io.Writer) int {
			return loadgen.CLI{WriteHTML: writeHTML}.Main(args, stdout, stderr)
		},
	})
}
