package producer

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
)

// attrTransactional and attrControl are the batch attribute bits drawn in
// internal/batch.
const (
	attrTransactional = 0x10
	attrControl       = 0x20
)

// hdr returns the header of a batch of count records from producer pid at
// epoch, starting at sequence seq. BaseOffset is left 0: the leader assigns
// it on append.
func hdr(pid int64, epoch int16, seq int32, count int32) batch.Header {
	return batch.Header{
		Magic:           batch.Magic,
		ProducerID:      pid,
		ProducerEpoch:   epoch,
		BaseSequence:    seq,
		LastOffsetDelta: count - 1,
		NumRecords:      count,
		FirstTimestamp:  1000,
		MaxTimestamp:    1000,
	}
}

// plainHdr is a batch without a producer id.
func plainHdr(count int32) batch.Header {
	h := hdr(-1, -1, -1, count)
	return h
}

// partition is a fake partition log around a State: it assigns offsets the
// way a leader does and records what it appended.
type partition struct {
	st   *State
	next int64 // log end offset
	now  int64 // ms
	log  []appended
}

type appended struct {
	h    batch.Header
	base int64
}

func newPartition(opts Options) *partition {
	return &partition{st: New(opts), now: 1_000_000}
}

// produce runs the broker's single-batch produce path: Check, append,
// Update. It returns the base offset acknowledged and whether it was a
// duplicate.
func (p *partition) produce(h batch.Header) (base int64, dup bool, err error) {
	d, err := p.st.Check(h)
	if err != nil {
		return -1, false, err
	}
	if d != nil {
		return d.FirstOffset, true, nil
	}
	base = p.next
	h.BaseOffset = base
	p.log = append(p.log, appended{h: h, base: base})
	p.next += int64(h.LastOffsetDelta) + 1
	p.st.Update(h, base, p.now)
	return base, false, nil
}

// mustProduce is produce that fails the test on error.
func (p *partition) mustProduce(t testing.TB, h batch.Header) int64 {
	t.Helper()
	base, _, err := p.produce(h)
	if err != nil {
		t.Fatalf("produce pid %d epoch %d seq %d: %v", h.ProducerID, h.ProducerEpoch, h.BaseSequence, err)
	}
	return base
}

// errKind names which sentinel err wraps, for table tests.
func errKind(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrOutOfOrderSequence):
		return "out-of-order"
	case errors.Is(err, ErrInvalidProducerEpoch):
		return "invalid-epoch"
	case errors.Is(err, ErrInvalidSequence):
		return "invalid-sequence"
	case errors.Is(err, ErrCorruptSnapshot):
		return "corrupt"
	}
	return "other: " + err.Error()
}

// sampleState builds a State with several producers in various shapes:
// full and partial batch windows, a wrapped sequence, an open transaction.
func sampleState() *State {
	p := newPartition(Options{})
	for i := int32(0); i < 7; i++ {
		p.produce(hdr(7, 0, i*3, 3))
	}
	p.produce(hdr(3, 2, 0, 1))
	p.produce(hdr(3, 2, 1, 10))
	p.produce(hdr(1<<40, 5, 2147483646, 4)) // wraps to 1
	tx := hdr(12, 1, 0, 2)
	tx.Attributes = attrTransactional
	p.produce(tx)
	p.now += 5
	p.produce(hdr(0, 0, 100, 1))
	return p.st
}

// makeBatch builds a valid uncompressed v2 batch of n small records from
// producer pid at epoch, starting at sequence seq, base offset 0, as an
// idempotent client sends it.
func makeBatch(tb testing.TB, pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	tb.Helper()
	var raw []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{
			OffsetDelta:      int32(i),
			TimestampDelta64: int64(i),
			Key:              fmt.Appendf(nil, "p%d-s%d", pid, int64(seq)+int64(i)),
			Value:            []byte("value"),
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		raw = r.AppendTo(raw)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                batch.Magic,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       ts,
		MaxTimestamp:         ts + int64(n-1),
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        seq,
		NumRecords:           int32(n),
		Records:              raw,
	}
	rb.Length = int32(len(raw) + batch.HeaderSize - 12)
	b := rb.AppendTo(nil)
	rb.CRC = int32(batch.Checksum(b))
	b = rb.AppendTo(b[:0])
	if _, err := batch.ParseHeader(b); err != nil {
		tb.Fatal(err)
	}
	return b
}
