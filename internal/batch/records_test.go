package batch

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRecordsRoundTripsEveryCodec(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			want := testRecords(40, 64, 21)
			b := newBatch(t, v, want)
			got, err := collect(t, b)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			for i := range want {
				w := want[i]
				w.Length = 0
				if w.Key == nil && got[i].Key != nil || w.Value == nil && got[i].Value != nil {
					t.Errorf("record %d: null lost", i)
				}
				if !reflect.DeepEqual(normalize(got[i]), normalize(w)) {
					t.Errorf("record %d\n got %+v\nwant %+v", i, got[i], w)
				}
			}
		})
	}
}

// normalize maps empty slices to a canonical form for comparison, keeping
// the null/empty distinction in a flag.
func normalize(r kmsg.Record) any {
	type hdr struct {
		Key     string
		Value   string
		NullVal bool
	}
	out := struct {
		OffsetDelta        int32
		TsDelta            int64
		Key, Value         string
		KeyNull, ValueNull bool
		Headers            []hdr
	}{r.OffsetDelta, r.TimestampDelta64, string(r.Key), string(r.Value), r.Key == nil, r.Value == nil, nil}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, hdr{h.Key, string(h.Value), h.Value == nil})
	}
	return out
}

func TestRecordsDecompressesLikeFranzGo(t *testing.T) {
	// Our decoders and franz-go's consumer decompressor must see the same
	// bytes: compare the records section byte for byte.
	dec := kgo.DefaultDecompressor()
	for _, v := range variants[1:] {
		recs := testRecords(25, 200, 22)
		b := newBatch(t, v, recs)
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		ours, buf, err := recordData(h, b)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		theirs, err := dec.Decompress(b[HeaderSize:], kgo.CompressionCodecType(v.codec))
		if err != nil {
			t.Fatalf("%s: franz-go: %v", v.name, err)
		}
		if !bytes.Equal(ours, theirs) || !bytes.Equal(ours, encodeRecords(recs)) {
			t.Errorf("%s: decompressed records differ", v.name)
		}
		putBuf(buf)
	}
}

func TestRecordsAllowsCompactedOffsetGaps(t *testing.T) {
	// Compaction keeps a batch's offset range and drops records: deltas 0, 4,
	// 9 with LastOffsetDelta 9 and NumRecords 3. Records reads it; Validate,
	// the produce-path check, refuses it.
	recs := []record{okRecord(0), okRecord(4), okRecord(9)}
	for _, v := range variants {
		b := handBatch(t, v, recs, func(rb *kmsg.RecordBatch) { rb.LastOffsetDelta = 9 })
		var deltas []int32
		err := Records(b, func(r Record) error { deltas = append(deltas, r.OffsetDelta); return nil })
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if !reflect.DeepEqual(deltas, []int32{0, 4, 9}) {
			t.Errorf("%s: deltas %v", v.name, deltas)
		}
		_, err = Validate(b, noLimits)
		wantErr(t, err, ErrInvalidRecord, kerr.InvalidRecord)
	}
}

func TestRecordsStopsAtCallbackError(t *testing.T) {
	stop := errors.New("stop")
	b := newBatch(t, variants[5], testRecords(10, 5, 23))
	calls := 0
	err := Records(b, func(Record) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 3 {
		t.Fatalf("err %v after %d calls, want stop after 3", err, calls)
	}
}

func TestRecordsRejects(t *testing.T) {
	none := variants[0]
	tests := []struct {
		name     string
		b        []byte
		sentinel error
		code     *kerr.Error
	}{
		{"magic 1", with(newBatch(t, none, testRecords(2, 2, 24)), func(b []byte) { b[16] = 1 }), ErrMagic, kerr.UnsupportedForMessageFormat},
		{"short", newBatch(t, none, testRecords(2, 2, 24))[:70], ErrTruncated, kerr.CorruptMessage},
		{"count above present", handBatch(t, none, okRecords(2), func(rb *kmsg.RecordBatch) { rb.NumRecords = 3 }), ErrInvalidRecord, kerr.InvalidRecord},
		{"count below present", handBatch(t, none, okRecords(2), func(rb *kmsg.RecordBatch) { rb.NumRecords = 1 }), ErrInvalidRecord, kerr.InvalidRecord},
		{"broken framing", handBatch(t, none, []record{okRecord(0), {raw: []byte{5, 0, 0}}}), ErrCorrupt, kerr.CorruptMessage},
		{"codec 7", handBatch(t, none, okRecords(1), func(rb *kmsg.RecordBatch) { rb.Attributes = 7 }), ErrCompression, kerr.UnsupportedCompressionType},
		{"bad gzip", handBatch(t, none, okRecords(1), func(rb *kmsg.RecordBatch) { rb.Attributes = 1 }), ErrCorrupt, kerr.CorruptMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			err := Records(tt.b, func(Record) error { n++; return nil })
			wantErr(t, err, tt.sentinel, tt.code)
		})
	}
}

func TestRecordsHeadersSliceIsReused(t *testing.T) {
	// Headers alias the iterator's storage: a record without headers after
	// one with headers must not show stale ones.
	recs := testRecords(6, 3, 25) // records 2 and 5 have headers
	b := newBatch(t, variants[0], recs)
	err := Records(b, func(r Record) error {
		if want := len(recs[r.OffsetDelta].Headers); len(r.Headers) != want {
			t.Errorf("record %d: %d headers, want %d", r.OffsetDelta, len(r.Headers), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRecordsZstdSeveralFrames(t *testing.T) {
	// Two frames, each declaring its own size: the fast path must notice the
	// second and fall back to the stream decoder, which reads both.
	recs := testRecords(30, 50, 26)
	raw := encodeRecords(recs)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	half := len(encodeRecords(recs[:15]))
	frames := enc.EncodeAll(raw[half:], enc.EncodeAll(raw[:half], nil))
	zstdAttr := func(rb *kmsg.RecordBatch) { rb.Attributes = int16(CodecZstd) }
	b := newBatchRaw(t, variants[0], recs, frames, zstdAttr)
	if _, err := Validate(b, noLimits); err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, b)
	if err != nil || len(got) != 30 || !bytes.Equal(got[29].Value, recs[29].Value) {
		t.Fatalf("%d records, %v", len(got), err)
	}

	// A small declared frame followed by a bomb: still bounded.
	bomb := append(enc.EncodeAll(raw, nil), zstdRLEFrame(5<<20, false)...)
	b = newBatchRaw(t, variants[0], recs, bomb, zstdAttr)
	_, err = Validate(b, noLimits)
	wantErr(t, err, ErrCorrupt, kerr.CorruptMessage)
}

func TestRecordsGzipSeveralMembers(t *testing.T) {
	// Java's GZIPInputStream reads concatenated gzip members; so do we.
	recs := testRecords(12, 30, 27)
	raw := encodeRecords(recs)
	half := len(encodeRecords(recs[:5]))
	var members []byte
	for _, part := range [][]byte{raw[:half], raw[half:]} {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(part); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		members = append(members, buf.Bytes()...)
	}
	b := newBatchRaw(t, variants[0], recs, members, func(rb *kmsg.RecordBatch) { rb.Attributes = int16(CodecGzip) })
	if _, err := Validate(b, noLimits); err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, b)
	if err != nil || len(got) != len(recs) {
		t.Fatalf("%d records, %v", len(got), err)
	}

	// Garbage after the last member is corruption, not ignored.
	b = newBatchRaw(t, variants[0], recs, append(bytes.Clone(members), 1, 2, 3), func(rb *kmsg.RecordBatch) { rb.Attributes = int16(CodecGzip) })
	_, err = Validate(b, noLimits)
	wantErr(t, err, ErrCorrupt, kerr.CorruptMessage)
}
