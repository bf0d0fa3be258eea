package batch

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rebuildKeeping re-encodes b keeping the records for which keep is true.
func rebuildKeeping(tb testing.TB, b []byte, keep func(i int) bool) []byte {
	tb.Helper()
	h, err := ParseHeader(b)
	if err != nil {
		tb.Fatal(err)
	}
	bl := NewBuilder(h)
	i := 0
	if err := Records(b, func(r Record) error {
		if keep(i) {
			bl.Add(r)
		}
		i++
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	out, err := bl.AppendTo(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func TestBuilderRebuildsEveryCodecWithGaps(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			recs := testRecords(40, 100, 3)
			orig := newBatch(t, v, recs, func(rb *kmsg.RecordBatch) {
				rb.FirstOffset = 1000
				rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = 7, 2, 500
				rb.PartitionLeaderEpoch = 9
			})
			odd := func(i int) bool { return i%3 == 1 }
			out := rebuildKeeping(t, orig, odd)
			h, err := CheckStored(out)
			if err != nil {
				t.Fatalf("CheckStored: %v", err)
			}
			oh, _ := ParseHeader(orig)
			if h.BaseOffset != 1000 || h.LastOffsetDelta != 39 || h.ProducerID != 7 || h.ProducerEpoch != 2 ||
				h.BaseSequence != 500 || h.PartitionLeaderEpoch != 9 || h.Attributes != oh.Attributes || h.FirstTimestamp != oh.FirstTimestamp {
				t.Fatalf("header not preserved: %+v vs %+v", h, oh)
			}
			if h.NumRecords != 13 {
				t.Fatalf("NumRecords %d, want 13", h.NumRecords)
			}
			if h.MaxTimestamp != baseTs+37 {
				t.Fatalf("MaxTimestamp %d, want %d", h.MaxTimestamp, baseTs+37)
			}
			got, err := collect(t, out)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := collect(t, orig)
			var wantKept []kmsg.Record
			for i := range want {
				if odd(i) {
					wantKept = append(wantKept, want[i])
				}
			}
			if len(got) != len(wantKept) {
				t.Fatalf("%d records, want %d", len(got), len(wantKept))
			}
			for i := range got {
				g, w := got[i], wantKept[i]
				if g.OffsetDelta != w.OffsetDelta || g.TimestampDelta64 != w.TimestampDelta64 ||
					!bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) ||
					!bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) || len(g.Headers) != len(w.Headers) {
					t.Fatalf("record %d: got %+v want %+v", i, g, w)
				}
			}
			// The produce-path validator refuses gaps; the stored check does not.
			if _, err := Validate(out, noLimits); !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("Validate of a compacted batch: %v, want ErrInvalidRecord", err)
			}
		})
	}
}

func TestBuilderKeepingEverythingValidates(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			orig := newBatch(t, v, testRecords(25, 64, 5))
			out := rebuildKeeping(t, orig, func(int) bool { return true })
			if _, err := Validate(out, noLimits); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if v.codec == CodecNone && !bytes.Equal(out, orig) {
				t.Fatalf("uncompressed rebuild differs from the original")
			}
		})
	}
}

func TestBuilderEmptyBatchKeepsProducerState(t *testing.T) {
	orig := newBatch(t, variants[5], testRecords(10, 10, 1), func(rb *kmsg.RecordBatch) {
		rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = 42, 1, 90
	})
	out := rebuildKeeping(t, orig, func(int) bool { return false })
	h, err := CheckStored(out)
	if err != nil {
		t.Fatal(err)
	}
	oh, _ := ParseHeader(orig)
	if err := Records(out, func(Record) error { return errors.New("a record in an empty batch") }); err != nil {
		t.Fatalf("Records of an empty compressed batch: %v", err)
	}
	if len(out) != HeaderSize || h.NumRecords != 0 || h.LastOffsetDelta != 9 || h.ProducerID != 42 ||
		h.BaseSequence != 90 || h.MaxTimestamp != oh.MaxTimestamp {
		t.Fatalf("empty batch %+v (%d bytes)", h, len(out))
	}
}

func TestCheckStoredRejectsDamage(t *testing.T) {
	orig := newBatch(t, variants[0], testRecords(5, 10, 1))
	out := rebuildKeeping(t, orig, func(i int) bool { return i != 2 })
	bad := bytes.Clone(out)
	bad[len(bad)-1] ^= 1
	if _, err := CheckStored(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped byte: %v", err)
	}
	// Last offset delta below the records present.
	short := bytes.Clone(out)
	short[offLastOffsetDelta+3] = 1
	fixCRC(short)
	if _, err := CheckStored(short); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("short last offset delta: %v", err)
	}
	if _, err := CheckStored(out[:len(out)-1]); err == nil {
		t.Fatal("truncated batch accepted")
	}
}
