package main

import (
	"io"

	"github.com/strata-io/strata/loadgen"
	"github.com/strata-io/strata/loadgen/report"
)

// writeHTML renders `strata loadgen run --html`.
var writeHTML func(io.Writer, *loadgen.Result) error = report.WriteHTML

func init() {
	addCommand(command{
		name:    "loadgen",
		summary: "drive a Kafka-protocol cluster: workloads, latency, throughput, cost",
		run: func(args []string, stdout, stderr io.Writer) int {
			return loadgen.CLI{WriteHTML: writeHTML}.Main(args, stdout, stderr)
		},
	})
}
