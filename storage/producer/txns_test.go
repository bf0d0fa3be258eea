package producer

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/strata-io/strata/internal/batch"
)

// TestTxnScripts runs the scenarios under testdata/txns against a [Txns]:
// Kafka's marker fencing, the first unstable offset, what a marker
// completes (the aborted-index entry and its last stable offset), the
// unreplicated rule, expiry and the snapshot round trip. Commands:
//
//	data pid=<id> epoch=<e> off=<o> [n=<records>] [ts=<ms>] [plain]   a (transactional) data batch at o
//	marker pid=<id> epoch=<e> coord=<c> off=<o> [commit] [ts=<ms>]    CheckMarker, then ApplyMarker if it passes
//	hw <offset>                                                         OnHighWatermark
//	expire now=<ms> ms=<expiration>                                     RemoveExpired
//	restart off=<o>                                                     Snapshot at o, RestoreTxns, must round-trip
//	state                                                               every producer, first unstable, unreplicated
//
// Regenerate expectations with -rewrite, then read the diff.
func TestTxnScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/txns", func(t *testing.T, path string) {
		tx := NewTxns()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]int64{}
			flags := map[string]bool{}
			fields := argFields(d)
			for _, f := range fields {
				k, v, ok := strings.Cut(f, "=")
				if !ok {
					if n, err := strconv.ParseInt(k, 10, 64); err == nil {
						args["_"] = n
						continue
					}
					flags[k] = true
					continue
				}
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("bad argument %q", f)
				}
				args[k] = n
			}
			switch d.Cmd {
			case "data":
				n := max(args["n"], 1)
				h := batch.Header{BaseOffset: args["off"], LastOffsetDelta: int32(n - 1), ProducerID: args["pid"],
					ProducerEpoch: int16(args["epoch"]), Attributes: attrTransactional, MaxTimestamp: args["ts"]}
				if flags["plain"] {
					h.Attributes = 0
				}
				tx.ApplyBatch(h, h.MaxTimestamp)
				return fmt.Sprintf("first-unstable=%d\n", tx.FirstUnstable())
			case "marker":
				m := Marker{ProducerID: args["pid"], ProducerEpoch: int16(args["epoch"]), CoordinatorEpoch: int32(args["coord"]), Commit: flags["commit"]}
				if err := tx.CheckMarker(m); err != nil {
					return "refused: " + kindOf(err) + "\n"
				}
				c := tx.ApplyMarker(m, args["off"], args["ts"])
				return fmt.Sprintf("completed pid=%d first=%d last=%d aborted=%v lso=%d\nfirst-unstable=%d\n",
					c.ProducerID, c.FirstOffset, c.LastOffset, c.Aborted, c.LastStableOffset, tx.FirstUnstable())
			case "hw":
				changed := tx.OnHighWatermark(args["_"])
				return fmt.Sprintf("changed=%v first-unstable=%d\n", changed, tx.FirstUnstable())
			case "expire":
				return fmt.Sprintf("removed=%d\n", tx.RemoveExpired(args["now"], args["ms"]))
			case "restart":
				snap := tx.Snapshot(args["off"])
				r, off, err := RestoreTxns(snap)
				if err != nil {
					t.Fatalf("restore: %v", err)
				}
				if off != args["off"] || !bytes.Equal(r.Snapshot(off), snap) {
					t.Fatalf("snapshot does not round-trip")
				}
				r.hw = tx.hw
				tx = r
				return fmt.Sprintf("restored %d bytes\n", len(snap))
			case "state":
				var b strings.Builder
				for _, p := range tx.Producers() {
					fmt.Fprintf(&b, "pid=%d epoch=%d coord=%d first=%d last=%d ts=%d\n", p.ID, p.Epoch, p.CoordinatorEpoch, p.FirstOffset, p.LastOffset, p.LastTimestamp)
				}
				fmt.Fprintf(&b, "open=%d first-unstable=%d unreplicated=%d\n", tx.Open(), tx.FirstUnstable(), tx.Unreplicated())
				return b.String()
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

func kindOf(err error) string {
	switch {
	case errors.Is(err, ErrInvalidProducerEpoch):
		return "INVALID_PRODUCER_EPOCH"
	case errors.Is(err, ErrTransactionCoordinatorFenced):
		return "TRANSACTION_COORDINATOR_FENCED"
	}
	return err.Error()
}

// TestUpdateMarkerKeepsCoordinatorEpoch: the broker's idempotence table
// learns a marker's coordinator epoch and bumped producer epoch, and a
// snapshot carries both, with the closed transaction.
func TestUpdateMarkerKeepsCoordinatorEpoch(t *testing.T) {
	s := New(Options{})
	h := hdr(5, 0, 0, 2)
	h.Attributes = attrTransactional
	s.Update(h, 10, 1)
	if e, _ := s.Entry(5); e.TxnFirstOffset != 10 {
		t.Fatalf("txn first offset %d, want 10", e.TxnFirstOffset)
	}
	s.UpdateMarker(Marker{ProducerID: 5, ProducerEpoch: 1, CoordinatorEpoch: 7}, 12, 2)
	e, _ := s.Entry(5)
	if e.TxnFirstOffset != -1 || e.CoordinatorEpoch != 7 || e.Epoch != 1 {
		t.Fatalf("after the marker: %+v", e)
	}
	// The fenced epoch is refused now.
	old := hdr(5, 0, 2, 1)
	old.Attributes = attrTransactional
	if _, err := s.Check(old); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch after a fencing marker: %v", err)
	}
	r := New(Options{})
	if err := r.Restore(s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if re, _ := r.Entry(5); re.CoordinatorEpoch != 7 || re.Epoch != 1 || re.TxnFirstOffset != -1 {
		t.Fatalf("restored %+v", re)
	}
}

// TestRemoveExpiredSparesOpenTransactions is Kafka's rule for both tables:
// producer.id.expiration.ms never forgets a producer with an open
// transaction.
func TestRemoveExpiredSparesOpenTransactions(t *testing.T) {
	s := New(Options{ExpirationMs: 100})
	h := hdr(1, 0, 0, 1)
	h.Attributes = attrTransactional
	s.Update(h, 0, 0)
	s.Update(hdr(2, 0, 0, 1), 1, 0)
	if n := s.RemoveExpired(1000); n != 1 {
		t.Fatalf("RemoveExpired removed %d, want 1 (the idle idempotent producer)", n)
	}
	if _, ok := s.Entry(1); !ok {
		t.Fatal("the producer with an open transaction expired")
	}
	tx := NewTxns()
	tx.ApplyBatch(batch.Header{ProducerID: 1, Attributes: attrTransactional}, 0)
	tx.ApplyMarker(Marker{ProducerID: 2}, 1, 0)
	if n := tx.RemoveExpired(1000, 100); n != 1 {
		t.Fatalf("Txns.RemoveExpired removed %d, want 1", n)
	}
	if _, ok := tx.Ongoing(1); !ok {
		t.Fatal("Txns forgot an open transaction")
	}
}
