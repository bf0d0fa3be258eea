package tiering

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/strata-io/strata/tiering/objstore"
)

func testPackSections() map[string][]byte {
	return map[string][]byte{
		ExtIndex:     bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 100),
		ExtTimeIndex: bytes.Repeat([]byte{9}, 12*50),
		ExtSnapshot:  []byte("producer state at 42"),
		ExtEpochs:    []byte("0\n1\n3 0\n"),
		ExtTxnIndex:  {}, // empty sections round-trip too
	}
}

// A packed object decodes back to its sections, and every byte of its
// directory is checked: flipping any one is refused, never misread.
func TestPackRoundTripAndCorruption(t *testing.T) {
	secs := testPackSections()
	b := encodePack(secs)
	got, err := decodePack(b)
	if err != nil {
		t.Fatal(err)
	}
	for ext, want := range secs {
		if !bytes.Equal(got[ext], want) {
			t.Fatalf(".%s = %q, want %q", ext, got[ext], want)
		}
	}
	dirLen := 8 + len(packKinds)*packEntrySize + 4
	for i := range dirLen {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		if _, err := decodePack(c); !errors.Is(err, ErrCorruptPack) {
			t.Fatalf("byte %d of the directory flipped: %v, want ErrCorruptPack", i, err)
		}
	}
	// A flipped section byte fails that section's crc.
	c := bytes.Clone(b)
	c[dirLen+3] ^= 1
	if _, err := decodePack(c); !errors.Is(err, ErrCorruptPack) {
		t.Fatalf("section byte flipped: %v, want ErrCorruptPack", err)
	}
	if _, err := decodePack(b[:dirLen-1]); !errors.Is(err, ErrCorruptPack) {
		t.Fatalf("truncated directory: %v", err)
	}
	if _, err := decodePack(b[:len(b)-1]); !errors.Is(err, ErrCorruptPack) {
		t.Fatalf("truncated sections: %v", err)
	}
}

// ReadSegmentFile reads a packed segment's sections with two ranged GETs
// each (directory, then exactly the section), and falls back to the
// separate objects of a segment archived before packing.
func TestReadSegmentFilePackedAndOldLayout(t *testing.T) {
	ctx := testCtx(t)
	store := objstore.NewMemStore()
	secs := testPackSections()
	packed := RemoteSegment{Partition: Partition{Topic: "orders", TopicID: testTopicID, Index: 0}, SegmentID: uuid.New(), BaseOffset: 0, EndOffset: 99}
	old := packed
	old.SegmentID, old.BaseOffset, old.EndOffset = uuid.New(), 100, 199
	b := encodePack(secs)
	if _, err := store.Put(ctx, packed.Key("p", ExtMeta), bytes.NewReader(b), int64(len(b)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for ext, d := range secs {
		if _, err := store.Put(ctx, old.Key("p", ext), bytes.NewReader(d), int64(len(d)), objstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, seg := range []RemoteSegment{packed, old} {
		for ext, want := range secs {
			store.ResetCalls()
			got, err := ReadSegmentFile(ctx, store, "p", seg, ext)
			if err != nil {
				t.Fatalf("%d .%s: %v", seg.BaseOffset, ext, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%d .%s = %q, want %q", seg.BaseOffset, ext, got, want)
			}
			if seg == packed {
				calls := store.Calls()
				if len(want) > 0 && (len(calls) != 2 || calls[1].Length != int64(len(want))) {
					t.Fatalf("packed .%s read with %+v, want a directory GET and one of %d bytes", ext, calls, len(want))
				}
			}
		}
	}
	// Through the fault wrapper: a torn directory or section read is an
	// error, never wrong bytes.
	for _, rule := range []objstore.Rule{
		{Op: objstore.OpGet, Nth: 1, FailReadAfter: 10},
		{Op: objstore.OpGet, Nth: 2, FailReadAfter: 10},
	} {
		f := objstore.WithFaults(store, rule)
		if got, err := ReadSegmentFile(ctx, f, "p", packed, ExtIndex); err == nil {
			t.Fatalf("torn read (%+v) returned %d bytes and no error", rule, len(got))
		}
	}
}
