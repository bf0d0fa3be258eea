// Package loadgen is Strata's load generator and benchmark harness: it
// drives any Kafka-protocol cluster through franz-go and reports
// throughput and latency (HdrHistogram) as a live line, a summary table, a
// JSON [Result] and an offline HTML report.
//
// It owns workloads, open-loop rate control, the producers and consumers
// it runs, and the reports. It must never import the broker or any other
// Strata server package: it is a pure client, so it measures Strata and
// other clusters alike and cannot flatter the broker by sharing its code.
package loadgen
