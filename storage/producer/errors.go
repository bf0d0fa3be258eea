package producer

import "github.com/twmb/franz-go/pkg/kerr"

// Errors. Every error this package returns wraps one of these; the first
// three in turn wrap the franz-go kerr error the broker answers a produce
// with, so both errors.Is(err, ErrOutOfOrderSequence) and
// errors.Is(err, kerr.OutOfOrderSequenceNumber) hold.
var (
	// ErrOutOfOrderSequence is returned by [State.Check] and [Tx.Check] for a
	// batch whose base sequence does not follow the producer's last one, and
	// for a new epoch that does not start at sequence 0. Wraps
	// kerr.OutOfOrderSequenceNumber.
	ErrOutOfOrderSequence error = &kindError{msg: "producer: out of order sequence number", code: kerr.OutOfOrderSequenceNumber}
	// ErrInvalidProducerEpoch is returned by [State.Check] and [Tx.Check] for
	// a batch whose epoch is older than the producer's current one (a fenced
	// zombie), and by [Txns.CheckMarker] for such a marker. Since Kafka 2.7 a produce answers this, not PRODUCER_FENCED.
	// Wraps kerr.InvalidProducerEpoch.
	ErrInvalidProducerEpoch error = &kindError{msg: "producer: invalid producer epoch", code: kerr.InvalidProducerEpoch}
	// ErrTransactionCoordinatorFenced is returned by [Txns.CheckMarker]
	// (and storage.Log.AppendMarker) for a marker whose coordinator epoch is
	// older than the one of the producer's last marker: it comes from a
	// deposed transaction coordinator. Wraps
	// kerr.TransactionCoordinatorFenced.
	ErrTransactionCoordinatorFenced error = &kindError{msg: "producer: transaction coordinator fenced", code: kerr.TransactionCoordinatorFenced}
	// ErrInvalidSequence is returned by [State.Check] and [Tx.Check] for a
	// batch with a producer id and a negative base sequence or last offset
	// delta ([batch.Validate] rejects those first). Wraps kerr.InvalidRecord.
	ErrInvalidSequence error = &kindError{msg: "producer: invalid sequence", code: kerr.InvalidRecord}
	// ErrCorruptSnapshot is returned by [State.Restore] (and reported by
	// [Load]) for snapshot bytes that fail the magic, version, checksum,
	// length or consistency checks. The caller rebuilds the state by
	// replaying the log instead.
	ErrCorruptSnapshot error = &kindError{msg: "producer: corrupt producer snapshot"}
)

// kindError is a sentinel that wraps the kerr error a broker answers with.
type kindError struct {
	msg  string
	code error // nil when the error never reaches a client
}

func (e *kindError) Error() string { return e.msg }

func (e *kindError) Unwrap() error { return e.code }
