// Package admincli is the logic of Strata's admin subcommands — `strata
// topic`, `group`, `cluster`, `produce`, `consume` and `completion` — a pure
// Kafka-protocol client built on franz-go's kgo and kadm, so it works
// against any Kafka-compatible cluster, not only Strata.
//
// It owns: flag parsing for those subcommands (global --brokers, --format,
// --timeout), the requests they make, their output (aligned tables by
// default, JSON with --format json) and their errors (one line, `strata:
// <what>: <KAFKA_ERROR_NAME>: <message>`; exit 1 when an operation failed,
// 2 for a usage error). Conventions, as Kafka's own tools: topic ids in
// Kafka's form (URL-safe base64 without padding), snake_case JSON keys,
// `group reset-offsets` changing nothing without --execute.
//
// It must never import the broker, storage, controller or tiering packages
// (a test checks `go list -deps`): everything it knows about a cluster it
// learns over the wire. It must never encode protocol structures by hand
// (kmsg/kadm do), never wait on a cluster without a deadline, and never
// panic on bad input.
//
// Usage (what cmd/strata does for each subcommand):
//
//	os.Exit(admincli.Run("topic", []string{"describe", "orders", "--format", "json"}, os.Stdout, os.Stderr))
package admincli
