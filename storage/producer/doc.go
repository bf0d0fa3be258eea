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
// ([State.Snapshot], [State.Restore]) and the rebuild at open ([Load]). It
// must never do I/O, start goroutines, take locks or read the clock: the
// broker calls it under the partition's append lock and passes times in
// milliseconds, and the storage layer reads and writes the snapshot files
// (storage.LogOptions.ProducerSnapshot, storage.Log.LatestProducerSnapshot).
// It knows nothing of transactions beyond keeping their fields (coordinator
// epoch, first offset of the open transaction) for later.
//
// The broker's produce path, one batch per partition as Kafka's v3+
// Produce allows, under the append lock:
//
//	h, err := batch.Validate(b, limits)
//	dup, err := st.Check(h)
//	switch {
//	case err != nil:
//		return err // wraps kerr.OutOfOrderSequenceNumber, InvalidProducerEpoch, ...
//	case dup != nil:
//		return ack(dup.FirstOffset, dup.Timestamp) // nothing appended
//	}
//	base := log.EndOffset()
//	if err := log.Append(b); err != nil {
//		return err // state untouched
//	}
//	st.Update(h, base, nowMs)
//
// Several batches in one request go through a [Tx] (see its doc), so a
// failure part way leaves the State as it was. Followers call
// [State.Update] for each batch they append (Kafka checks only client
// appends) and [State.TruncateTo] when they truncate; a timer calls
// [State.RemoveExpired] under the lock.
//
// A State is not safe for concurrent use. Errors wrap this package's
// sentinels ([ErrOutOfOrderSequence], [ErrInvalidProducerEpoch],
// [ErrInvalidSequence], [ErrCorruptSnapshot]); the first three wrap the
// kerr error to answer with. Check and Update do not allocate once a
// producer is known.
package producer
