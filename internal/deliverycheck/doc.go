// Package deliverycheck judges a history of Kafka client operations
// (sends and their outcomes, polls by consumers, a final full read) by
// Kafka's system-test delivery rule and Jepsen's queue anomalies
// (jepsen.tests.kafka), for the fault tests of replication (issue 14) and
// `strata loadgen verify` (issue 15).
//
// It owns the pure [Check] of a [History], a small franz-go driver that
// builds one ([Recorder], [Produce], [Consume] in a group,
// [ConsumePartitions] without one, [FinalRead]), self-describing values
// ([EncodeValue], [VerifyValue]: producer, sequence, CRC-32C) and the rows
// of the fault matrix ([FaultResult]; bench/faults prints them). It does
// not start brokers or inject faults (internal/netfault, the tests do).
//
// Anomalies found, each from client observations alone:
//   - lost: an acknowledged value absent from the final full read of its
//     partition (Kafka's validate_delivery: acknowledged ⊆ consumed); with
//     no final read, an acknowledged value never read although a later
//     offset of its partition was (Jepsen's lost-write);
//   - unseen: an acknowledged value never read, with no final read and no
//     later offset read (not yet a loss, only not proven present);
//   - duplicate: one value at two offsets (a failure when the producer is
//     idempotent, [History.Idempotent]);
//   - inconsistent offset: two values at one offset, from acknowledgements
//     and reads of any consumer (several replicas serving one offset with
//     different bytes show up here);
//   - offset reused: two sends acknowledged at one offset;
//   - nonmonotonic poll: a consumer reading an offset at or below the one
//     it read before in the same assignment generation of a partition;
//   - poll skip: a consumer jumping over an offset known to hold a value
//     within one assignment generation;
//   - G1a: a value whose send definitely failed ([SendFailed]) is read;
//   - corrupt: with [History.Checksummed], a value read that fails
//     [VerifyValue] (the cluster changed its bytes; the same read shows
//     as an inconsistent offset, and the original as lost);
//   - reordered: with [History.Checksummed], two acknowledged records of
//     one producer in one partition at offsets that invert the order it
//     sent them in (an idempotent producer's order is kept per partition).
//
// Usage:
//
//	rec := deliverycheck.NewRecorder(true) // idempotent producer
//	load := deliverycheck.Produce(ctx, cl, "t", rec, deliverycheck.ProduceOptions{Prefix: "run1"})
//	...inject faults, heal...
//	stats := load.Stop() // every send has its outcome
//	if err := deliverycheck.FinalRead(ctx, cl, "t", rec); err != nil { ... }
//	rep := deliverycheck.Check(rec.History())
//	if err := rep.Err(); err != nil { t.Fatal(err) }
//
// Check is deterministic: the same history gives the same report, every
// list sorted.
package deliverycheck
