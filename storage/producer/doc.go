// Package producer keeps one partition's idempotent-producer state: for
// each producer id, its epoch and the sequence numbers and offsets of its
// last five batches. With it the broker acknowledges a retried batch with
// the offsets it was first written at instead of writing it twice, refuses
// a gap in a producer's sequence (OUT_OF_ORDER_SEQUENCE_NUMBER) and a
// fenced producer's older epoch (INVALID_PRODUCER_EPOCH). It is modelled on
// Kafka's ProducerStateManager and ProducerAppendInfo and follows Kafka
// 3.x/4.x rules, including KIP-360: a producer the partition has forgotten
// is accepted at whatever sequence it is at.
//
// It owns the rules ([State.Check]), the table ([State.Update],
// [State.TruncateTo], [State.RemoveExpired]), the undo of a failed request
// ([Tx]), the snapshot format written at each segment roll
// ([State.SnapshotAt], [State.Restore]) and the rebuild at open ([Load]). It
// must never do I/O, start goroutines, take locks or read the clock: the
// broker serialises calls to it and passes times in milliseconds, and the
// storage layer reads and writes the snapshot files
// (storage.LogOptions.ProducerSnapshot, storage.Log.LatestProducerSnapshot).
// Transactions: the State keeps each producer's open transaction's first
// offset and the coordinator epoch of its last marker
// ([State.UpdateMarker]) in its snapshot. The partition's transaction
// truth is [Txns] (txns.go), which storage.Log owns: marker fencing,
// the first unstable offset, what an ABORT adds to the aborted-transaction
// index, its own snapshot format (txns_snapshot.go).
//
// The broker's produce path, one batch per partition as Kafka's v3+
// Produce allows, under the partition's append lock. The State also needs
// its own small mutex (mu below), held for State calls but never across
// the log append: storage calls LogOptions.ProducerSnapshot under its own
// lock from inside Append (a roll before the write) and from the retention
// goroutine (a roll when every segment expires), and that callback takes
// mu to call [State.SnapshotAt]. Recording the batch in a [Tx] before the
// append and committing after makes that snapshot exact on either side of
// the write:
//
//	h, err := batch.Validate(b, limits)
//	mu.Lock()
//	tx := st.Begin()
//	dup, err := tx.Check(h)
//	if err != nil || dup != nil {
//		tx.Abort()
//		mu.Unlock()
//		return answer(err, dup) // err wraps kerr.OutOfOrderSequenceNumber, ...;
//		                        // dup: ack dup.FirstOffset, append nothing
//	}
//	tx.Update(h, log.LogEndOffset(), nowMs)
//	mu.Unlock()
//	_, err = log.Append(b, opts) // may roll: ProducerSnapshot locks mu, calls st.SnapshotAt(next)
//	mu.Lock()
//	if err != nil { tx.Abort() } else { tx.Commit() }
//	mu.Unlock()
//
// Several batches in one request are Checked and Updated in order in the
// same Tx, so each is checked against the ones before it, and a failure
// part way leaves the State as it was. Followers do the same with Update
// alone (Kafka checks only client appends) and call [State.TruncateTo]
// when they truncate (under the append lock: no Tx may be open); a timer
// calls [State.RemoveExpired] under mu, which spares the producers of an
// open Tx. At
// open, [Load] rebuilds the State from the latest snapshot and the log.
//
// Times: Kafka records each batch's MaxTimestamp, which is the append time
// on LogAppendTime topics and the producer's clock on CreateTime ones, for
// expiry and for the LogAppendTime a duplicate's acknowledgement reports.
// Replay does the same ([State.ReplayBatch]); the broker should pass
// h.MaxTimestamp to Update on CreateTime topics and its append clock on
// LogAppendTime ones, so that a rebuilt State matches the live one.
//
// Differences from Kafka: the snapshot keeps all five batches of each
// producer (Kafka keeps the last), so a retry across a restart is still
// recognised as a duplicate; [State.TruncateTo] forgets what it cannot
// keep instead of reloading from a snapshot (an unknown producer is
// accepted, so forgetting is the safe side); a marker replayed from the
// log closes the open transaction but its coordinator epoch (in the
// record, not the header) is not read back (storage's [Txns] has it); [Load] skips a corrupt snapshot and
// replays the whole log instead of failing.
//
// A State is not safe for concurrent use. Errors wrap this package's
// sentinels ([ErrOutOfOrderSequence], [ErrInvalidProducerEpoch],
// [ErrInvalidSequence], [ErrCorruptSnapshot]); the first three wrap the
// kerr error to answer with. Check and Update do not allocate once a
// producer is known.
package producer
