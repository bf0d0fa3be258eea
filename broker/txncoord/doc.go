// Package txncoord is the transaction coordinator's deterministic core:
// Kafka's TransactionMetadata / TransactionCoordinator state machine
// (transaction version 1, the path every client takes while Strata does
// not finalize transaction.version 2) over the transactional ids of the
// __transaction_state partitions this broker leads, and the codec of that
// topic's records (kmsg's TxnMetadataKey / TxnMetadataValue).
//
// It owns the decisions: producer ids and epochs of transactional ids
// (InitProducerId with fencing and KIP-360 resumes), the partitions of a
// transaction (AddPartitionsToTxn, AddOffsetsToTxn, the KIP-890 part-1
// verify-only check), the Prepare → markers → Complete sequence of EndTxn,
// the timeout abort, the expiry of idle ids, the replay of a partition on
// leadership, and the DescribeTransactions / ListTransactions views. It
// does not do I/O, start goroutines or read the clock: every call takes
// the time in milliseconds and returns [Effects] — answers to requests,
// records to append to __transaction_state, WriteTxnMarkers to deliver —
// and the broker feeds back what became of them ([Coordinator.AppendDone],
// [Coordinator.MarkerDone]). It does not own the partition side (control
// batches, LSO, .txnindex: storage), TxnOffsetCommit's pending offsets
// (broker/group), or ACL checks (the handlers).
//
// Usage (the broker's wiring, abridged; one mutex around the Coordinator):
//
//	c := txncoord.New(txncoord.Config{Partitions: 50}, pids.allocate)
//	run(c.BeginLoad(7, leaderEpoch))             // leader of __transaction_state-7
//	eff, err := c.Load(now, 7, leaderEpoch, recs) // its records, in offset order
//	run(eff)                                     // resends markers of PrepareX txns
//	run(c.InitProducerID(now, txncoord.InitRequest{Req: id, Version: v, TxnID: "t", TimeoutMs: 60000, ProducerID: -1, Epoch: -1}))
//	// run: send eff.Answers; append each eff.Appends[i] (acks=all) and call
//	// run(c.AppendDone(now, a.Token, code)); deliver eff.Markers and call
//	// run(c.MarkerDone(now, ack)) per partition; every 10 s
//	// run(c.AbortTimedOut(now)), hourly run(c.ExpireIDs(now)).
//
// Read DESIGN.md for the state diagram and which Kafka answer each case
// gives.
package txncoord
