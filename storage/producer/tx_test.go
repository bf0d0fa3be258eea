package producer

import (
	"errors"
	"testing"
)

func TestTxCheckSeesEarlierBatchesOfTheRequest(t *testing.T) {
	s := New(Options{})
	s.Update(hdr(1, 0, 0, 2), 0, 1)
	tx := s.Begin()
	if _, err := tx.Check(hdr(1, 0, 2, 2)); err != nil {
		t.Fatal(err)
	}
	tx.Update(hdr(1, 0, 2, 2), 2, 1)
	// The request's second batch follows its first, not the committed state.
	if _, err := tx.Check(hdr(1, 0, 4, 1)); err != nil {
		t.Fatalf("second batch: %v", err)
	}
	if _, err := tx.Check(hdr(1, 0, 2, 1)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("second batch overlapping the first: %v", err)
	}
	tx.Update(hdr(1, 0, 4, 1), 4, 1)
	tx.Commit()
	pr, _ := s.Entry(1)
	if len(pr.Batches) != 3 || pr.Batches[2].LastSeq != 4 {
		t.Fatalf("after commit: %+v", pr)
	}
}

// TestTxAbortRestoresState covers the failure part way through a request:
// existing producers get their entries back byte for byte, producers the
// request introduced disappear, and batches without producer id are
// ignored.
func TestTxAbortRestoresState(t *testing.T) {
	s := sampleState()
	before := s.Snapshot()
	tx := s.Begin()
	tx.Update(hdr(7, 0, 21, 1), 1000, 9)
	tx.Update(hdr(7, 1, 0, 1), 1001, 9)    // epoch bump clears producer 7's batches
	tx.Update(hdr(3, 2, 11, 5), 1002, 9)   // fills producer 3's window
	tx.Update(hdr(1234, 0, 0, 1), 1007, 9) // new producer
	tx.Update(hdr(1234, 0, 1, 1), 1008, 9) // touched twice: one undo record
	tx.Update(plainHdr(3), 1009, 9)
	if s.Producers() != 6 {
		t.Fatalf("%d producers inside the tx", s.Producers())
	}
	if len(tx.undo) != 3 {
		t.Fatalf("%d undo records, want 3", len(tx.undo))
	}
	tx.Abort()
	if after := s.Snapshot(); string(after) != string(before) {
		t.Fatal("Abort did not restore the state")
	}
	tx.Abort() // closed: no-op
	// The State's Tx is reusable after Abort and after Commit.
	tx = s.Begin()
	tx.Update(hdr(1234, 0, 0, 1), 1000, 9)
	tx.Commit()
	tx.Abort() // closed: no-op, does not undo the commit
	if _, ok := s.Entry(1234); !ok {
		t.Fatal("committed producer missing")
	}
}

func TestTxMisusePanics(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	s := New(Options{})
	tx := s.Begin()
	mustPanic("Begin twice", func() { s.Begin() })
	mustPanic("Update", func() { s.Update(hdr(1, 0, 0, 1), 0, 0) })
	mustPanic("TruncateTo", func() { s.TruncateTo(0) })
	mustPanic("Restore", func() { _ = s.Restore(New(Options{}).Snapshot()) })
	tx.Commit()
	mustPanic("Check after Commit", func() { _, _ = tx.Check(hdr(1, 0, 0, 1)) })
	mustPanic("Update after Commit", func() { tx.Update(hdr(1, 0, 0, 1), 0, 0) })
	mustPanic("Commit after Commit", func() { tx.Commit() })
}

func TestRemoveExpiredSparesProducersOfOpenTx(t *testing.T) {
	s := New(Options{ExpirationMs: 10})
	s.Update(hdr(1, 0, 0, 1), 0, 0)
	s.Update(hdr(2, 0, 0, 1), 1, 0)
	tx := s.Begin()
	tx.Update(hdr(1, 0, 1, 1), 2, 0) // an old append time: would expire
	if n := s.RemoveExpired(100); n != 1 {
		t.Fatalf("removed %d, want 1 (producer 2 only)", n)
	}
	if _, ok := s.Entry(1); !ok {
		t.Fatal("producer of the open Tx expired")
	}
	tx.Abort()
	if pr, ok := s.Entry(1); !ok || len(pr.Batches) != 1 {
		t.Fatalf("Abort after RemoveExpired: %+v %v", pr, ok)
	}
}
