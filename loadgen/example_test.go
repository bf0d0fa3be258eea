package loadgen_test

import (
	"context"
	"log"
	"os"

	"github.com/strata-io/strata/loadgen"
)

// The usage example of doc.go. It has no Output comment, so `go test`
// compiles it but does not run it (it wants a broker on 127.0.0.1:9092).
func ExampleRun() {
	ctx := context.Background()
	w, err := loadgen.Preset("fixed-rate")
	if err != nil {
		log.Fatal(err)
	}
	w.Rate, w.Duration, w.Warmup = 5000, "10s", "2s"
	res, err := loadgen.Run(ctx, loadgen.Options{
		Brokers:  []string{"127.0.0.1:9092"},
		Workload: w,         // Run fills in the defaults
		Progress: os.Stderr, // the live line, once a second
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := loadgen.WriteSummary(os.Stdout, res); err != nil {
		log.Fatal(err)
	}
}
