package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParseHeaderReadsEveryField(t *testing.T) {
	recs := testRecords(3, 10, 1)
	b := newBatch(t, variants[0], recs, func(rb *kmsg.RecordBatch) {
		rb.FirstOffset = 1234567890123
		rb.PartitionLeaderEpoch = 42
		rb.Attributes = 0x10 | 0x08 | 0x20 // transactional, LogAppendTime, control
		rb.FirstTimestamp = 1111
		rb.MaxTimestamp = 2222
		rb.ProducerID = 77
		rb.ProducerEpoch = 5
		rb.FirstSequence = 99
	})
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{
		BaseOffset:           1234567890123,
		Length:               int32(len(b) - 12),
		PartitionLeaderEpoch: 42,
		Magic:                2,
		CRC:                  binary.BigEndian.Uint32(b[17:]),
		Attributes:           0x38,
		LastOffsetDelta:      2,
		FirstTimestamp:       1111,
		MaxTimestamp:         2222,
		ProducerID:           77,
		ProducerEpoch:        5,
		BaseSequence:         99,
		NumRecords:           3,
	}
	if h != want {
		t.Fatalf("header\n got %+v\nwant %+v", h, want)
	}
	if h.Size() != len(b) || h.LastOffset() != 1234567890125 {
		t.Errorf("Size %d LastOffset %d", h.Size(), h.LastOffset())
	}
	if h.Codec() != CodecNone || h.TimestampType() != LogAppendTime || !h.Transactional() || !h.Control() || !h.HasProducerID() {
		t.Errorf("accessors: codec %v type %v txn %v control %v pid %v", h.Codec(), h.TimestampType(), h.Transactional(), h.Control(), h.HasProducerID())
	}

	// The kmsg decoder must agree on every field it knows.
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if rb.FirstOffset != h.BaseOffset || uint32(rb.CRC) != h.CRC || rb.FirstSequence != h.BaseSequence || rb.Length != h.Length {
		t.Errorf("kmsg disagrees: %+v", rb)
	}
}

func TestParseHeaderAccessorsOnPlainBatch(t *testing.T) {
	for _, v := range variants {
		b := newBatch(t, v, testRecords(2, 5, 2))
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.Codec() != v.codec || h.TimestampType() != CreateTime || h.Transactional() || h.Control() || h.HasProducerID() {
			t.Errorf("%s: %+v", v.name, h)
		}
		if h.Codec().String() != v.name[:len(h.Codec().String())] {
			t.Errorf("codec name %q for %s", h.Codec(), v.name)
		}
	}
	if Codec(6).String() != "codec(6)" {
		t.Errorf("unknown codec name %q", Codec(6))
	}
}

func TestParseHeaderRejects(t *testing.T) {
	good := newBatch(t, variants[0], testRecords(1, 1, 3))
	tests := []struct {
		name     string
		b        []byte
		sentinel error
		code     *kerr.Error
	}{
		{"empty", nil, ErrTruncated, kerr.CorruptMessage},
		{"short", good[:HeaderSize-1], ErrTruncated, kerr.CorruptMessage},
		{"magic 1", with(good, func(b []byte) { b[16] = 1 }), ErrMagic, kerr.UnsupportedForMessageFormat},
		{"magic 0 short message", with(good[:30], func(b []byte) { b[16] = 0 }), ErrMagic, kerr.UnsupportedForMessageFormat},
		{"magic 3", with(good, func(b []byte) { b[16] = 3 }), ErrMagic, kerr.UnsupportedForMessageFormat},
		{"length below header", with(good, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 48) }), ErrCorrupt, kerr.CorruptMessage},
		{"negative length", with(good, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 0xffffff00) }), ErrCorrupt, kerr.CorruptMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHeader(tt.b)
			wantErr(t, err, tt.sentinel, tt.code)
		})
	}
	if _, err := ParseHeader(good[:HeaderSize]); err != nil {
		t.Errorf("a header alone must parse (no record check): %v", err)
	}
	_, err := ParseHeader(nil)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short header error %v does not wrap io.ErrUnexpectedEOF", err)
	}
}

// with returns a modified copy of b.
func with(b []byte, mod func([]byte)) []byte {
	c := bytes.Clone(b)
	mod(c)
	return c
}

func TestChecksumIsCastagnoli(t *testing.T) {
	// The CRC-32C check value: crc32c("123456789") = 0xE3069283.
	b := append(make([]byte, 21), "123456789"...)
	if got := Checksum(b); got != 0xE3069283 {
		t.Fatalf("Checksum = %08x, want e3069283", got)
	}
	for _, v := range variants {
		b := newBatch(t, v, testRecords(5, 20, 4))
		if got, want := Checksum(b), binary.BigEndian.Uint32(b[17:]); got != want {
			t.Errorf("%s: Checksum %08x, stored %08x", v.name, got, want)
		}
	}
}

func TestSetBaseOffsetKeepsCRCValid(t *testing.T) {
	for _, v := range variants {
		b := newBatch(t, v, testRecords(4, 8, 5))
		orig := bytes.Clone(b)
		SetBaseOffset(b, 1<<40+3)
		SetPartitionLeaderEpoch(b, 17)
		h, err := Validate(b, noLimits)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if h.BaseOffset != 1<<40+3 || h.LastOffset() != 1<<40+6 || h.PartitionLeaderEpoch != 17 {
			t.Errorf("%s: header %+v", v.name, h)
		}
		if !bytes.Equal(b[17:], orig[17:]) || !bytes.Equal(b[8:12], orig[8:12]) {
			t.Errorf("%s: SetBaseOffset/SetPartitionLeaderEpoch touched bytes beyond their fields", v.name)
		}
	}
}

func TestSetLogAppendTimeRewritesMaxTimestampAndCRC(t *testing.T) {
	const appendTime = baseTs + 5000
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			b := newBatch(t, v, testRecords(6, 30, 6))
			orig := bytes.Clone(b)
			SetLogAppendTime(b, appendTime)
			h, err := Validate(b, Limits{Now: appendTime, TimestampBeforeMaxMs: 0, TimestampAfterMaxMs: 0})
			if err != nil {
				t.Fatalf("Validate after SetLogAppendTime: %v", err)
			}
			if h.TimestampType() != LogAppendTime || h.MaxTimestamp != appendTime || h.FirstTimestamp != baseTs || h.Codec() != v.codec {
				t.Errorf("header %+v", h)
			}
			if h.CRC != crcOf(b) {
				t.Errorf("stored CRC %08x, computed %08x", h.CRC, crcOf(b))
			}
			// Only attributes, maxTimestamp and the CRC may change.
			if !bytes.Equal(b[:17], orig[:17]) || !bytes.Equal(b[23:35], orig[23:35]) || !bytes.Equal(b[43:], orig[43:]) {
				t.Error("SetLogAppendTime changed bytes outside attributes, maxTimestamp and crc")
			}
			// Idempotent.
			again := bytes.Clone(b)
			SetLogAppendTime(again, appendTime)
			if !bytes.Equal(again, b) {
				t.Error("SetLogAppendTime twice with the same time changed the batch")
			}
		})
	}
}

// crcOf recomputes a batch's CRC independently of Checksum.
func crcOf(b []byte) uint32 {
	c := bytes.Clone(b)
	fixCRC(c)
	return binary.BigEndian.Uint32(c[17:])
}

func TestSplitWalksRecordSet(t *testing.T) {
	var set []byte
	var sizes []int
	for i, v := range variants {
		b := newBatch(t, v, testRecords(i+1, 10*i, uint64(i)))
		sizes = append(sizes, len(b))
		set = append(set, b...)
	}
	rest := set
	for i := range sizes {
		first, r, err := Split(rest)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if len(first) != sizes[i] {
			t.Fatalf("batch %d: %d bytes, want %d", i, len(first), sizes[i])
		}
		if _, err := Validate(first, noLimits); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if cap(first) != len(first) {
			t.Errorf("batch %d: first has spare capacity %d: appending to it would overwrite the next batch", i, cap(first)-len(first))
		}
		rest = r
	}
	if _, _, err := Split(rest); err != io.EOF {
		t.Fatalf("Split of nothing: %v, want io.EOF", err)
	}
}

func TestSplitRejectsPartialBatch(t *testing.T) {
	b := newBatch(t, variants[0], testRecords(3, 10, 7))
	set := append(bytes.Clone(b), b...)
	for _, cut := range []int{1, 11, 12, HeaderSize, len(b) - 1} {
		first, rest, err := Split(set[len(b) : len(b)+cut])
		wantErr(t, err, ErrTruncated, kerr.CorruptMessage)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut %d: %v does not wrap io.ErrUnexpectedEOF", cut, err)
		}
		if first != nil || len(rest) != cut {
			t.Errorf("cut %d: first %d bytes, rest %d bytes", cut, len(first), len(rest))
		}
	}
	bad := with(b, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 10) })
	_, _, err := Split(bad)
	wantErr(t, err, ErrCorrupt, kerr.CorruptMessage)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a too-small length is corruption, not a torn tail: %v", err)
	}
}

func TestErrorsNameThePackage(t *testing.T) {
	for _, err := range []error{ErrCorrupt, ErrTruncated, ErrInvalidRecord, ErrTooLarge, ErrMagic, ErrTimestamp, ErrCompression} {
		if msg := err.Error(); len(msg) < 7 || msg[:7] != "batch: " {
			t.Errorf("%q lacks the batch: prefix", msg)
		}
	}
	_, err := ParseHeader(nil)
	if msg := err.Error(); msg[:7] != "batch: " {
		t.Errorf("%q lacks the batch: prefix", msg)
	}
}
