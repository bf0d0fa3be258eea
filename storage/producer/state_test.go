package producer

import (
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/batch"
)

// TestCheckRules runs each produce rule as a table: the setup batches are
// appended (through Check and Update), then check is Checked.
func TestCheckRules(t *testing.T) {
	const max = math.MaxInt32
	seqs := func(pid int64, epoch int16, n int, size int32) []batch.Header {
		var hs []batch.Header
		for i := 0; i < n; i++ {
			hs = append(hs, hdr(pid, epoch, int32(i)*size, size))
		}
		return hs
	}
	replayed := hdr(9, -1, 40, 1) // an entry with no epoch, as a follower may replay

	tests := []struct {
		name    string
		setup   []batch.Header
		check   batch.Header
		want    string // errKind of Check
		dupBase int64  // base offset acknowledged for a duplicate, -1 = not a duplicate
	}{
		{"no producer id", seqs(1, 0, 2, 1), plainHdr(3), "ok", -1},
		{"unknown producer at seq 0", nil, hdr(1, 0, 0, 5), "ok", -1},
		{"unknown producer at any seq (KIP-360)", seqs(2, 0, 3, 1), hdr(1, 3, 4711, 5), "ok", -1},
		{"next in sequence", seqs(1, 0, 3, 2), hdr(1, 0, 6, 1), "ok", -1},
		{"gap", seqs(1, 0, 3, 2), hdr(1, 0, 7, 1), "out-of-order", -1},
		{"behind, not retained", seqs(1, 0, 3, 2), hdr(1, 0, 1, 1), "out-of-order", -1},
		{"duplicate of the last batch", seqs(1, 0, 3, 2), hdr(1, 0, 4, 2), "ok", 4},
		{"duplicate of the fifth last batch", seqs(1, 0, 7, 2), hdr(1, 0, 4, 2), "ok", 4},
		{"sixth last batch is forgotten", seqs(1, 0, 7, 2), hdr(1, 0, 2, 2), "out-of-order", -1},
		{"same first sequence, other last", seqs(1, 0, 3, 2), hdr(1, 0, 4, 3), "out-of-order", -1},
		{"same last sequence, other first", seqs(1, 0, 3, 2), hdr(1, 0, 5, 1), "out-of-order", -1},
		{"older epoch", seqs(1, 3, 2, 1), hdr(1, 2, 2, 1), "invalid-epoch", -1},
		{"duplicate from an older epoch", append(seqs(1, 0, 2, 1), hdr(1, 1, 0, 1)), hdr(1, 0, 1, 1), "invalid-epoch", -1},
		{"newer epoch at seq 0", seqs(1, 0, 2, 1), hdr(1, 1, 0, 4), "ok", -1},
		{"newer epoch not at seq 0", seqs(1, 0, 2, 1), hdr(1, 1, 2, 1), "out-of-order", -1},
		{"newer epoch jump at seq 0", seqs(1, 0, 2, 1), hdr(1, 9, 0, 1), "ok", -1},
		{"sequence wraps to 0", []batch.Header{hdr(1, 0, max-4, 5)}, hdr(1, 0, 0, 1), "ok", -1},
		{"no wrap short of max", []batch.Header{hdr(1, 0, max-5, 5)}, hdr(1, 0, 0, 1), "out-of-order", -1},
		{"batch spanning the wrap", []batch.Header{hdr(1, 0, max-1, 4)}, hdr(1, 0, 2, 1), "ok", -1},
		{"duplicate spanning the wrap", []batch.Header{hdr(1, 0, max-1, 4)}, hdr(1, 0, max-1, 4), "ok", 0},
		{"negative base sequence", nil, hdr(1, 0, -1, 1), "invalid-sequence", -1},
		{"negative last offset delta", nil, hdr(1, 0, 0, 0), "invalid-sequence", -1},
		{"entry without epoch takes any sequence", []batch.Header{replayed}, hdr(9, -1, 7, 1), "ok", -1},
		{"entry without epoch takes any new epoch", []batch.Header{replayed}, hdr(9, 0, 7, 1), "ok", -1},
		{"other producers do not interfere", append(seqs(1, 0, 2, 1), seqs(2, 4, 5, 1)...), hdr(1, 0, 2, 1), "ok", -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPartition(Options{})
			for _, h := range tc.setup {
				p.st.Update(withBase(h, p.next), p.next, p.now)
				p.next += int64(h.LastOffsetDelta) + 1
			}
			before := p.st.Snapshot()
			dup, err := p.st.Check(tc.check)
			if got := errKind(err); got != tc.want {
				t.Fatalf("Check = %s (%v), want %s", got, err, tc.want)
			}
			switch {
			case tc.dupBase < 0 && dup != nil:
				t.Fatalf("unexpected duplicate %+v", *dup)
			case tc.dupBase >= 0 && dup == nil:
				t.Fatalf("no duplicate, want one at %d", tc.dupBase)
			case dup != nil:
				want := BatchMeta{
					FirstSeq: tc.check.BaseSequence, LastSeq: incSeq(tc.check.BaseSequence, tc.check.LastOffsetDelta),
					FirstOffset: tc.dupBase, LastOffset: tc.dupBase + int64(tc.check.LastOffsetDelta), Timestamp: p.now,
				}
				if *dup != want {
					t.Fatalf("duplicate %+v, want %+v", *dup, want)
				}
			}
			if after := p.st.Snapshot(); string(after) != string(before) {
				t.Fatal("Check changed the state")
			}
		})
	}
}

func withBase(h batch.Header, base int64) batch.Header {
	h.BaseOffset = base
	return h
}

func TestCheckErrorsWrapKafkaCodes(t *testing.T) {
	p := newPartition(Options{})
	p.mustProduce(t, hdr(1, 2, 0, 1))
	_, err := p.st.Check(hdr(1, 2, 5, 1))
	if !errors.Is(err, kerr.OutOfOrderSequenceNumber) || !errors.Is(err, ErrOutOfOrderSequence) {
		t.Errorf("gap: %v does not wrap OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
	_, err = p.st.Check(hdr(1, 1, 1, 1))
	if !errors.Is(err, kerr.InvalidProducerEpoch) || !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Errorf("old epoch: %v does not wrap INVALID_PRODUCER_EPOCH", err)
	}
	_, err = p.st.Check(hdr(1, 2, -3, 1))
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Errorf("negative sequence: %v does not wrap INVALID_RECORD", err)
	}
	var ke *kerr.Error
	if _, err = p.st.Check(hdr(1, 2, 9, 1)); !errors.As(err, &ke) || ke.Code != kerr.OutOfOrderSequenceNumber.Code {
		t.Errorf("errors.As kerr: %v", err)
	}
}

// TestProduceRetriedBatchIsAckedWithOriginalOffsets is the idempotent
// producer's whole point: a retry after a lost acknowledgement is
// acknowledged at the first write's offsets and not written again.
func TestProduceRetriedBatchIsAckedWithOriginalOffsets(t *testing.T) {
	p := newPartition(Options{})
	p.mustProduce(t, plainHdr(10)) // someone else's data first: offsets 0-9
	first := p.mustProduce(t, hdr(5, 0, 0, 3))
	p.mustProduce(t, hdr(5, 0, 3, 3))
	base, dup, err := p.produce(hdr(5, 0, 0, 3))
	if err != nil || !dup || base != first || first != 10 {
		t.Fatalf("retry: base %d dup %v err %v, want %d true nil", base, dup, err, first)
	}
	if len(p.log) != 3 || p.next != 16 {
		t.Fatalf("retry appended: %d batches, end %d", len(p.log), p.next)
	}
}

func TestUpdateKeepsLastFiveBatches(t *testing.T) {
	p := newPartition(Options{})
	for i := int32(0); i < 8; i++ {
		p.mustProduce(t, hdr(1, 0, i*2, 2))
	}
	pr, ok := p.st.Entry(1)
	if !ok || len(pr.Batches) != BatchesPerProducer {
		t.Fatalf("producer %+v ok %v", pr, ok)
	}
	for i, b := range pr.Batches {
		seq := int32(i+3) * 2
		want := BatchMeta{FirstSeq: seq, LastSeq: seq + 1, FirstOffset: int64(seq), LastOffset: int64(seq) + 1, Timestamp: p.now}
		if b != want {
			t.Errorf("batch %d = %+v, want %+v", i, b, want)
		}
	}
}

func TestUpdateNewEpochClearsBatches(t *testing.T) {
	p := newPartition(Options{})
	p.mustProduce(t, hdr(1, 0, 0, 1))
	p.mustProduce(t, hdr(1, 0, 1, 1))
	p.mustProduce(t, hdr(1, 1, 0, 1))
	pr, _ := p.st.Entry(1)
	if pr.Epoch != 1 || len(pr.Batches) != 1 || pr.Batches[0].FirstOffset != 2 {
		t.Fatalf("after bump: %+v", pr)
	}
	// The old epoch's seq 1 is not a duplicate any more: it is fenced.
	if _, err := p.st.Check(hdr(1, 0, 1, 1)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch retry: %v", err)
	}
}

func TestUpdateIgnoresBatchesWithoutProducerOrSequence(t *testing.T) {
	s := New(Options{})
	s.Update(plainHdr(4), 0, 1)
	s.Update(hdr(1, 0, -1, 1), 4, 1)
	s.Update(hdr(1, 0, 0, 0), 5, 1) // negative last offset delta
	if s.Producers() != 0 {
		t.Fatalf("%d producers", s.Producers())
	}
}

func TestUpdateTransactionFieldsAndMarker(t *testing.T) {
	s := New(Options{})
	h := hdr(4, 0, 0, 2)
	h.Attributes = attrTransactional
	s.Update(h, 10, 1)
	s.Update(hdr(4, 0, 2, 2), 12, 2)
	pr, _ := s.Entry(4)
	if pr.TxnFirstOffset != 10 || pr.CoordinatorEpoch != -1 {
		t.Fatalf("open transaction: %+v", pr)
	}
	m := hdr(4, 0, -1, 1) // markers carry no sequence
	m.Attributes = attrTransactional | attrControl
	s.Update(m, 14, 3)
	pr, _ = s.Entry(4)
	if pr.TxnFirstOffset != -1 || len(pr.Batches) != 2 || pr.LastTimestamp != 3 {
		t.Fatalf("after marker: %+v", pr)
	}
}

func TestReplayBatchUsesBaseOffsetAndMaxTimestamp(t *testing.T) {
	s := New(Options{})
	h := hdr(1, 0, 0, 3)
	h.BaseOffset, h.MaxTimestamp = 77, 5555
	s.ReplayBatch(h)
	pr, _ := s.Entry(1)
	if want := (BatchMeta{0, 2, 77, 79, 5555}); len(pr.Batches) != 1 || pr.Batches[0] != want || pr.LastTimestamp != 5555 {
		t.Fatalf("%+v", pr)
	}
}

func TestTruncateToDropsBatchesAtAndAboveOffset(t *testing.T) {
	p := newPartition(Options{})
	p.mustProduce(t, hdr(1, 0, 0, 2)) // 0-1
	p.mustProduce(t, hdr(2, 0, 0, 2)) // 2-3
	p.mustProduce(t, hdr(1, 0, 2, 2)) // 4-5
	tx := hdr(3, 0, 0, 1)
	tx.Attributes = attrTransactional
	p.mustProduce(t, tx)              // 6
	p.mustProduce(t, hdr(1, 0, 4, 2)) // 7-8
	p.st.TruncateTo(5)                // inside producer 1's second batch: it goes too
	if p.st.Producers() != 2 {
		t.Fatalf("%d producers, want 2", p.st.Producers())
	}
	if _, ok := p.st.Entry(3); ok {
		t.Fatal("producer 3 lost all batches but survived")
	}
	pr, _ := p.st.Entry(1)
	if len(pr.Batches) != 1 || pr.Batches[0].LastOffset != 1 {
		t.Fatalf("producer 1: %+v", pr)
	}
	// The producer continues after what survived.
	p.next = 4
	if _, _, err := p.produce(hdr(1, 0, 2, 2)); err != nil {
		t.Fatalf("resend after truncation: %v", err)
	}
	p.st.TruncateTo(0)
	if p.st.Producers() != 0 {
		t.Fatalf("%d producers after truncating everything", p.st.Producers())
	}
}

func TestTruncateToClosesTransactionStartedAbove(t *testing.T) {
	s := New(Options{})
	s.Update(hdr(1, 0, 0, 1), 0, 1)
	h := hdr(1, 0, 1, 1)
	h.Attributes = attrTransactional
	s.Update(h, 5, 1)
	s.TruncateTo(5)
	pr, ok := s.Entry(1)
	if !ok || pr.TxnFirstOffset != -1 || len(pr.Batches) != 1 {
		t.Fatalf("%+v %v", pr, ok)
	}
}

func TestRemoveExpiredForgetsIdleProducers(t *testing.T) {
	s := New(Options{ExpirationMs: 1000})
	s.Update(hdr(1, 0, 0, 1), 0, 100)
	s.Update(hdr(2, 0, 0, 1), 1, 600)
	h := hdr(3, 0, 0, 1)
	h.Attributes = attrTransactional
	s.Update(h, 2, 0) // open transaction: never expires
	if n := s.RemoveExpired(1099); n != 0 {
		t.Fatalf("removed %d at 1099", n)
	}
	if n := s.RemoveExpired(1100); n != 1 {
		t.Fatalf("removed %d at 1100, want 1 (expiry is inclusive)", n)
	}
	if _, ok := s.Entry(1); ok {
		t.Fatal("producer 1 survived")
	}
	if n := s.RemoveExpired(1 << 40); n != 1 || s.Producers() != 1 {
		t.Fatalf("removed %d, %d left", n, s.Producers())
	}
	// A forgotten producer is accepted where it stands.
	if _, err := s.Check(hdr(2, 0, 57, 1)); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveExpiredDefaultsAndNever(t *testing.T) {
	s := New(Options{})
	s.Update(hdr(1, 0, 0, 1), 0, 0)
	if s.RemoveExpired(DefaultExpirationMs-1) != 0 || s.RemoveExpired(DefaultExpirationMs) != 1 {
		t.Fatal("default expiration is not producer.id.expiration.ms = 1 day")
	}
	s = New(Options{ExpirationMs: -1})
	s.Update(hdr(1, 0, 0, 1), 0, 0)
	if s.RemoveExpired(math.MaxInt64) != 0 {
		t.Fatal("negative expiration expired a producer")
	}
}

func TestProducerReturnsCopy(t *testing.T) {
	s := sampleState()
	pr, _ := s.Entry(7)
	pr.Batches[0].FirstOffset = -5
	if again, _ := s.Entry(7); again.Batches[0].FirstOffset == -5 {
		t.Fatal("Producer exposes internal state")
	}
	if _, ok := s.Entry(99); ok {
		t.Fatal("unknown producer found")
	}
}

func TestIncSeqWrapsLikeKafka(t *testing.T) {
	for _, tc := range []struct{ seq, delta, want int32 }{
		{0, 0, 0}, {5, 3, 8}, {math.MaxInt32, 0, math.MaxInt32}, {math.MaxInt32, 1, 0},
		{math.MaxInt32 - 2, 5, 2}, {math.MaxInt32 - 5, 5, math.MaxInt32},
	} {
		if got := incSeq(tc.seq, tc.delta); got != tc.want {
			t.Errorf("incSeq(%d, %d) = %d, want %d", tc.seq, tc.delta, got, tc.want)
		}
	}
	if !inSequence(-1, 0) || !inSequence(math.MaxInt32, 0) || inSequence(math.MaxInt32, 1) || inSequence(3, 3) {
		t.Error("inSequence")
	}
}
