// Package loadgen is Strata's load generator and benchmark harness: it
// drives any Kafka-protocol cluster through franz-go and reports
// throughput and latency (HdrHistogram) as a live line, a summary table, a
// JSON [Result] and an offline HTML report.
//
// It owns workloads, open-loop rate control, the producers and consumers
// it runs, and the reports. It must never import the broker or any other
// Strata server package: it is a pure client, so it measures Strata and
// other clusters alike and cannot flatter the broker by sharing its code.
//
// From the command line (the binary registers [CLI]):
//
//	strata loadgen max-throughput --brokers 127.0.0.1:9092 --duration 30s --out max.json
//	strata loadgen run --workload workloads/fixed-rate.yaml --rate 50000 --html report.html
//	strata loadgen compare before.json after.json
//	strata loadgen verify --brokers 127.0.0.1:9092 --duration 60s --replication-factor 3 --out verify.json
//
// verify is not a measurement but a durability check (verify.go): a fresh
// topic, idempotent acks=all producers of self-describing values
// (producer, sequence, CRC-32C), consumer groups and group-less readers of
// every partition, a final read of every partition from its start to its
// end, and internal/deliverycheck's Check of the whole history for lost,
// duplicated, inconsistent, reordered, skipped, aborted-but-read and
// corrupted records. Inject faults while it runs (bench/faults does); it
// prints the verdict, exits 0 clean, 1 anomalies, 2 usage, 3 no verdict,
// and --out writes the history and the anomalies as JSON.
//
// From Go, the shipped fixed-rate scenario at 5,000 records/s for ten
// seconds, against a broker on the loopback:
//
//	ctx := context.Background()
//	w, err := loadgen.Preset("fixed-rate")
//	if err != nil {
//		log.Fatal(err)
//	}
//	w.Rate, w.Duration, w.Warmup = 5000, "10s", "2s"
//	res, err := loadgen.Run(ctx, loadgen.Options{
//		Brokers:  []string{"127.0.0.1:9092"},
//		Workload: w,         // Run fills in the defaults
//		Progress: os.Stderr, // the live line, once a second
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	if err := loadgen.WriteSummary(os.Stdout, res); err != nil {
//		log.Fatal(err)
//	}
//
// (example_test.go compiles the same code; [StartKfake] gives a peer
// baseline to run it against.)
//
// Files:
//
//	run.go       Options, Run: the scenario phases (prepare topics, steady or
//	             catch-up, finish into a Result), the cleanup of what it made
//	produce.go   the producers: kgo options, one goroutine per producer on
//	             its share of the open-loop schedule, publish latency
//	consume.go   the consumer groups: assignment tracking, end-to-end
//	             latency, consumer lag
//	sample.go    the once-a-second sampler behind the live line and the series
//	catchup.go   the catch-up scenario (backlog, remote tier wait, catch up)
//	workload.go, config.go, presets.go  the Workload, its YAML, defaults and
//	             the shipped scenarios
//	rate.go      Clock and the open-loop Schedule
//	dist.go      record size and key distributions
//	hist.go      latency Recorders (HdrHistogram)
//	result.go, summary.go  the Result, its summary table and JSON
//	stats.go, cost.go  broker resources and object-store cost from /metrics
//	env.go, machine.go  the environment and the machine's disk/sendfile limits
//	verify.go    `verify`: the durability workload and its verdict
//	             (internal/deliverycheck judges the history)
//	kfake.go     franz-go's kfake as a peer baseline (in memory or --data-dir)
//	cli.go       `strata loadgen`
//	report/      the offline HTML report
package loadgen
