package batch

import (
	"bytes"
	"encoding/binary"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestValidateAcceptsEveryCodec(t *testing.T) {
	for _, v := range variants {
		for _, n := range []int{1, 2, 50, 1000} {
			recs := testRecords(n, 100, uint64(n))
			b := newBatch(t, v, recs)
			orig := bytes.Clone(b)
			h, err := Validate(b, Limits{MaxBatchBytes: len(b), Now: baseTs, TimestampBeforeMaxMs: 0, TimestampAfterMaxMs: int64(n)})
			if err != nil {
				t.Fatalf("%s n=%d: %v", v.name, n, err)
			}
			if h.NumRecords != int32(n) || h.Codec() != v.codec || h.Size() != len(b) {
				t.Errorf("%s n=%d: header %+v", v.name, n, h)
			}
			if !bytes.Equal(b, orig) {
				t.Errorf("%s n=%d: Validate modified the batch", v.name, n)
			}
		}
	}
}

func TestValidateAcceptsProducerAndTransactionalBatches(t *testing.T) {
	for _, v := range variants {
		b := newBatch(t, v, testRecords(5, 10, 9), func(rb *kmsg.RecordBatch) {
			rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = 1000, 3, 0
			rb.Attributes |= 0x10
			rb.PartitionLeaderEpoch = 7
			rb.FirstOffset = 500
		})
		h, err := Validate(b, noLimits)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if !h.Transactional() || h.ProducerID != 1000 || h.BaseSequence != 0 {
			t.Errorf("%s: %+v", v.name, h)
		}
	}
}

// record builds one record by hand, so that tests can break any field.
type record struct {
	lengthAdj int // added to the correct length
	tsDelta   int64
	offDelta  int32
	keyLen    int32 // -1 null; otherwise len(key) unless keyLenSet
	key       []byte
	valLen    int32
	val       []byte
	hdrCount  int32
	hdrs      []byte // raw header bytes
	raw       []byte // if set, replaces the whole encoded record
}

func (r record) encode() []byte {
	if r.raw != nil {
		return r.raw
	}
	body := kbin.AppendInt8(nil, 0)
	body = kbin.AppendVarlong(body, r.tsDelta)
	body = kbin.AppendVarint(body, r.offDelta)
	body = kbin.AppendVarint(body, r.keyLen)
	body = append(body, r.key...)
	body = kbin.AppendVarint(body, r.valLen)
	body = append(body, r.val...)
	body = kbin.AppendVarint(body, r.hdrCount)
	body = append(body, r.hdrs...)
	out := kbin.AppendVarint(nil, int32(len(body)+r.lengthAdj))
	return append(out, body...)
}

// okRecord is a well-formed record with offset delta i and timestamp delta i.
func okRecord(i int32) record {
	return record{tsDelta: int64(i), offDelta: i, keyLen: 1, key: []byte("k"), valLen: 2, val: []byte("vv")}
}

// handBatch builds a batch of hand-made records whose header is otherwise
// what a producer of len(recs) records would write.
func handBatch(t *testing.T, v variant, recs []record, mods ...func(*kmsg.RecordBatch)) []byte {
	t.Helper()
	var raw []byte
	km := make([]kmsg.Record, len(recs))
	for i, r := range recs {
		raw = append(raw, r.encode()...)
		km[i].TimestampDelta64 = r.tsDelta
	}
	return newBatchRaw(t, v, km, raw, mods...)
}

func okRecords(n int) []record {
	recs := make([]record, n)
	for i := range recs {
		recs[i] = okRecord(int32(i))
	}
	return recs
}

func TestValidateRejects(t *testing.T) {
	none := variants[0]
	good := newBatch(t, none, testRecords(3, 10, 11))
	hdr := func(mod func(*kmsg.RecordBatch)) []byte { return handBatch(t, none, okRecords(3), mod) }
	recs := func(mod func([]record) []record) []byte { return handBatch(t, none, mod(okRecords(3))) }
	mid := func(r record) []byte { return recs(func(rs []record) []record { rs[1] = r; return rs }) }

	tests := []struct {
		name     string
		b        []byte
		lim      Limits
		sentinel error
		code     *kerr.Error
	}{
		// Magic and lengths.
		{"magic 1", with(good, func(b []byte) { b[16] = 1 }), noLimits, ErrMagic, kerr.UnsupportedForMessageFormat},
		{"short buffer", good[:40], noLimits, ErrTruncated, kerr.CorruptMessage},
		{"buffer shorter than length", good[:len(good)-1], noLimits, ErrTruncated, kerr.CorruptMessage},
		{"buffer longer than length", append(bytes.Clone(good), 0), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"length below header", with(good, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 20) }), noLimits, ErrCorrupt, kerr.CorruptMessage},
		// CRC.
		{"crc mismatch in value", with(good, func(b []byte) { b[len(b)-3] ^= 1 }), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"crc mismatch in attributes", with(good, func(b []byte) { b[22] ^= 0x10 }), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"crc field flipped", with(good, func(b []byte) { b[17] ^= 0x80 }), noLimits, ErrCorrupt, kerr.CorruptMessage},
		// Size limit.
		{"too large", good, Limits{MaxBatchBytes: len(good) - 1, TimestampBeforeMaxMs: -1, TimestampAfterMaxMs: -1}, ErrTooLarge, kerr.MessageTooLarge},
		// Attributes.
		{"codec 5", hdr(func(rb *kmsg.RecordBatch) { rb.Attributes = 5 }), noLimits, ErrCompression, kerr.UnsupportedCompressionType},
		{"codec 6", hdr(func(rb *kmsg.RecordBatch) { rb.Attributes = 6 }), noLimits, ErrCompression, kerr.UnsupportedCompressionType},
		{"codec 7", hdr(func(rb *kmsg.RecordBatch) { rb.Attributes = 7 }), noLimits, ErrCompression, kerr.UnsupportedCompressionType},
		{"attribute bit 7", hdr(func(rb *kmsg.RecordBatch) { rb.Attributes = 0x80 }), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"attribute bit 15", hdr(func(rb *kmsg.RecordBatch) { rb.Attributes = -0x8000 }), noLimits, ErrCorrupt, kerr.CorruptMessage},
		// Batch fields.
		{"zero records", handBatch(t, none, nil), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		{"negative count", hdr(func(rb *kmsg.RecordBatch) { rb.NumRecords = -1 }), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		{"count above present", hdr(func(rb *kmsg.RecordBatch) { rb.NumRecords, rb.LastOffsetDelta = 4, 3 }), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		{"count below present", hdr(func(rb *kmsg.RecordBatch) { rb.NumRecords, rb.LastOffsetDelta = 2, 1 }), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		{"count cannot fit", hdr(func(rb *kmsg.RecordBatch) { rb.NumRecords, rb.LastOffsetDelta = math.MaxInt32, math.MaxInt32-1 }), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		{"last offset delta too big", hdr(func(rb *kmsg.RecordBatch) { rb.LastOffsetDelta = 3 }), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		{"last offset delta negative", hdr(func(rb *kmsg.RecordBatch) { rb.LastOffsetDelta = -1 }), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		{"transactional without producer", hdr(func(rb *kmsg.RecordBatch) { rb.Attributes = 0x10 }), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		{"producer without sequence", hdr(func(rb *kmsg.RecordBatch) { rb.ProducerID = 5 }), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		// Offset deltas.
		{"offset deltas out of order", recs(func(rs []record) []record { rs[1].offDelta, rs[2].offDelta = 2, 1; return rs }), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		{"offset delta duplicated", recs(func(rs []record) []record { rs[2].offDelta = 1; return rs }), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		{"offset delta gap", recs(func(rs []record) []record { rs[2].offDelta = 3; return rs }), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		{"first offset delta not zero", recs(func(rs []record) []record {
			for i := range rs {
				rs[i].offDelta++
			}
			return rs
		}), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		// Record framing.
		{"record length too long", mid(func() record { r := okRecord(1); r.lengthAdj = 1; return r }()), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"record length too short", mid(func() record { r := okRecord(1); r.lengthAdj = -1; return r }()), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"record length past end", recs(func(rs []record) []record { rs[2].lengthAdj = 100; return rs }), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"record length zero", mid(record{raw: []byte{0}}), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"record length negative", mid(record{raw: kbin.AppendVarint(nil, -5)}), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"truncated length varint", recs(func(rs []record) []record { rs[2] = record{raw: []byte{0x80}}; return rs }), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"overlong length varint", mid(record{raw: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}}), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"truncated timestamp varlong", mid(record{raw: []byte{3, 0, 0x80, 0x80}}), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"truncated offset varint", mid(record{raw: []byte{3, 0, 2, 0x80}}), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"key length below -1", mid(func() record { r := okRecord(1); r.keyLen = -2; r.key = nil; return r }()), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"key longer than record", mid(func() record { r := okRecord(1); r.keyLen = 50; return r }()), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"value length below -1", mid(func() record { r := okRecord(1); r.valLen = -3; r.val = nil; return r }()), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"value longer than record", mid(func() record { r := okRecord(1); r.valLen = 3; return r }()), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"negative header count", mid(func() record { r := okRecord(1); r.hdrCount = -1; return r }()), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"header count above bytes", mid(func() record { r := okRecord(1); r.hdrCount = 1000; return r }()), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"null header key", mid(func() record {
			r := okRecord(1)
			r.hdrCount, r.hdrs = 1, []byte{1, 2} // key length -1, value length 1
			return r
		}()), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"header value past record", mid(func() record {
			r := okRecord(1)
			r.hdrCount, r.hdrs = 1, []byte{2, 'h', 10} // key "h", value length 5, no bytes
			return r
		}()), noLimits, ErrCorrupt, kerr.CorruptMessage},
		{"trailing garbage after records", func() []byte {
			b := handBatch(t, none, okRecords(3))
			b = append(b, 0, 0, 0)
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
			fixCRC(b)
			return b
		}(), noLimits, ErrInvalidRecord, kerr.InvalidRecord},
		// Timestamps.
		{"max timestamp too small", hdr(func(rb *kmsg.RecordBatch) { rb.MaxTimestamp-- }), noLimits, ErrTimestamp, kerr.InvalidTimestamp},
		{"max timestamp too big", hdr(func(rb *kmsg.RecordBatch) { rb.MaxTimestamp++ }), noLimits, ErrTimestamp, kerr.InvalidTimestamp},
		{"record too old", good, Limits{Now: baseTs + 1000, TimestampBeforeMaxMs: 999, TimestampAfterMaxMs: -1}, ErrTimestamp, kerr.InvalidTimestamp},
		{"record too new", good, Limits{Now: baseTs, TimestampBeforeMaxMs: -1, TimestampAfterMaxMs: 1}, ErrTimestamp, kerr.InvalidTimestamp},
		{"zero limits are strict", good, Limits{Now: baseTs}, ErrTimestamp, kerr.InvalidTimestamp},
		{"far past cannot overflow", hdr(func(rb *kmsg.RecordBatch) { rb.FirstTimestamp, rb.MaxTimestamp = math.MinInt64, math.MinInt64+2 }),
			Limits{Now: baseTs, TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: -1}, ErrTimestamp, kerr.InvalidTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Validate(tt.b, tt.lim)
			wantErr(t, err, tt.sentinel, tt.code)
			t.Log(err)
		})
	}
}

func TestValidateTimestampLimitBoundsAreInclusive(t *testing.T) {
	b := newBatch(t, variants[0], testRecords(10, 5, 12)) // timestamps baseTs .. baseTs+9
	for _, lim := range []Limits{
		{Now: baseTs + 9, TimestampBeforeMaxMs: 9, TimestampAfterMaxMs: 0},
		{Now: baseTs, TimestampBeforeMaxMs: 0, TimestampAfterMaxMs: 9},
		{Now: baseTs + 4, TimestampBeforeMaxMs: 4, TimestampAfterMaxMs: 5},
		{Now: 0, TimestampBeforeMaxMs: 0, TimestampAfterMaxMs: 0, SkipTimestampCheck: true},
		{Now: math.MinInt64, TimestampBeforeMaxMs: -1, TimestampAfterMaxMs: -1},
	} {
		if _, err := Validate(b, lim); err != nil {
			t.Errorf("%+v: %v", lim, err)
		}
	}
	for _, lim := range []Limits{
		{Now: baseTs + 10, TimestampBeforeMaxMs: 9, TimestampAfterMaxMs: -1},
		{Now: baseTs - 1, TimestampBeforeMaxMs: -1, TimestampAfterMaxMs: 9},
	} {
		_, err := Validate(b, lim)
		wantErr(t, err, ErrTimestamp, kerr.InvalidTimestamp)
	}
}

func TestValidateSkipTimestampCheckSkipsMaxTimestamp(t *testing.T) {
	// On a LogAppendTime topic the broker overwrites MaxTimestamp, so a
	// producer's wrong one does not matter.
	b := handBatch(t, variants[0], okRecords(3), func(rb *kmsg.RecordBatch) { rb.MaxTimestamp = 7 })
	if _, err := Validate(b, Limits{SkipTimestampCheck: true}); err != nil {
		t.Fatal(err)
	}
	_, err := Validate(b, noLimits)
	wantErr(t, err, ErrTimestamp, kerr.InvalidTimestamp)
	SetLogAppendTime(b, baseTs)
	if _, err := Validate(b, noLimits); err != nil {
		t.Fatalf("after SetLogAppendTime: %v", err)
	}
}

func TestValidateExemptsNoTimestampRecords(t *testing.T) {
	// Records with timestamp -1 (Kafka's NO_TIMESTAMP) skip the limits.
	b := handBatch(t, variants[0], okRecords(2), func(rb *kmsg.RecordBatch) {
		rb.FirstTimestamp, rb.MaxTimestamp = -2, -1 // records at -2+0, -2+1
	})
	_, err := Validate(b, Limits{Now: baseTs, TimestampBeforeMaxMs: 10, TimestampAfterMaxMs: 10})
	wantErr(t, err, ErrTimestamp, kerr.InvalidTimestamp) // -2 is a real, ancient timestamp
	b = handBatch(t, variants[0], okRecords(1), func(rb *kmsg.RecordBatch) {
		rb.FirstTimestamp, rb.MaxTimestamp = -1, -1
	})
	if _, err := Validate(b, Limits{Now: baseTs, TimestampBeforeMaxMs: 10, TimestampAfterMaxMs: 10}); err != nil {
		t.Fatal(err)
	}
}

func TestValidateAcceptsTimestampsGoingBackwards(t *testing.T) {
	// A Java producer given explicit timestamps writes negative deltas;
	// MaxTimestamp is the largest, not the last.
	recs := okRecords(3)
	recs[0].tsDelta, recs[1].tsDelta, recs[2].tsDelta = 0, 50, -20
	b := handBatch(t, variants[0], recs)
	h, err := Validate(b, noLimits)
	if err != nil {
		t.Fatal(err)
	}
	if h.MaxTimestamp != baseTs+50 {
		t.Fatalf("MaxTimestamp %d", h.MaxTimestamp)
	}
}

func TestValidateRejectsCompressedDamage(t *testing.T) {
	for _, v := range variants[1:] {
		t.Run(v.name, func(t *testing.T) {
			recs := testRecords(20, 50, 13)
			// Count mismatch behind compression: the header claims one record
			// more than the compressed block holds.
			b := newBatch(t, v, recs, func(rb *kmsg.RecordBatch) { rb.NumRecords, rb.LastOffsetDelta = 21, 20 })
			_, err := Validate(b, noLimits)
			wantErr(t, err, ErrInvalidRecord, kerr.InvalidRecord)

			// Broken framing behind compression.
			raw := encodeRecords(recs)
			raw[0] = 0x80 // first record's length varint now runs on
			raw[1] |= 0x80
			b = newBatchRaw(t, v, recs, raw)
			_, err = Validate(b, noLimits)
			wantErr(t, err, ErrCorrupt, kerr.CorruptMessage)

			// The compressed block itself damaged, CRC recomputed: the
			// decoder or the record walk must notice.
			good := newBatch(t, v, recs)
			for _, cut := range []int{1, len(good) - HeaderSize - 1} {
				d := bytes.Clone(good[:len(good)-cut])
				binary.BigEndian.PutUint32(d[8:], uint32(len(d)-12))
				fixCRC(d)
				if _, err := Validate(d, noLimits); err == nil {
					t.Errorf("truncated compressed block (-%d bytes) accepted", cut)
				}
			}
			garbage := bytes.Clone(good)
			for i := HeaderSize; i < len(garbage); i++ {
				garbage[i] = byte(i * 7)
			}
			fixCRC(garbage)
			_, err = Validate(garbage, noLimits)
			wantErr(t, err, ErrCorrupt, kerr.CorruptMessage)
		})
	}
}

func TestValidateBoundsDecompression(t *testing.T) {
	// Inflating 64 MiB per codec takes seconds under -race: lower the limit.
	// TestValidateBoundsDecompressionAtDefaultLimit covers the real one.
	maxDecompressed = 1 << 20
	t.Cleanup(func() { maxDecompressed = maxDecompressedDefault })

	// Each bomb is a small batch whose records inflate past the limit.
	zeros := make([]byte, maxDecompressed+1)
	oneRec := []kmsg.Record{{}}
	bombs := map[string][]byte{}
	for _, v := range variants[1:] {
		switch {
		case v.codec == CodecSnappy && !v.xerial:
			// A raw snappy block announcing 2 GiB: rejected before decoding.
			blk := binary.AppendUvarint(nil, 1<<31)
			blk = append(blk, 0)
			bombs[v.name] = newBatchRaw(t, variants[0], oneRec, blk, func(rb *kmsg.RecordBatch) { rb.Attributes = int16(CodecSnappy) })
		case v.xerial:
			// Many xerial chunks, each legitimately sized, adding up past the limit.
			chunk := s2.EncodeSnappy(nil, make([]byte, maxDecompressed/16))
			out := append(bytes.Clone(xerialHeader), 0, 0, 0, 1, 0, 0, 0, 1)
			for range 17 {
				out = binary.BigEndian.AppendUint32(out, uint32(len(chunk)))
				out = append(out, chunk...)
			}
			bombs[v.name] = newBatchRaw(t, variants[0], oneRec, out, func(rb *kmsg.RecordBatch) { rb.Attributes = int16(CodecSnappy) })
		default:
			bombs[v.name] = newBatchRaw(t, v, oneRec, zeros)
		}
	}
	for name, b := range bombs {
		t.Run(name, func(t *testing.T) {
			if len(b) > maxDecompressed/8 {
				t.Fatalf("bomb of %d bytes is no bomb", len(b))
			}
			_, err := Validate(b, noLimits)
			wantErr(t, err, ErrCorrupt, kerr.CorruptMessage)
			err = Records(b, func(Record) error { return nil })
			wantErr(t, err, ErrCorrupt, kerr.CorruptMessage)
		})
	}
}

func TestValidateUncompressedDoesNotAllocate(t *testing.T) {
	b := newBatch(t, variants[0], testRecords(200, 100, 14))
	lim := Limits{MaxBatchBytes: 1 << 20, Now: baseTs, TimestampBeforeMaxMs: 1000, TimestampAfterMaxMs: 1000}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Validate(b, lim); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Validate of an uncompressed batch allocated %.1f times", allocs)
	}
}

func TestValidateConcurrentCompressed(t *testing.T) {
	// Pooled decoders and buffers must not leak state between goroutines:
	// run all codecs at once, each goroutine checking its own results.
	var batches [][]byte
	for i, v := range variants {
		batches = append(batches, newBatch(t, v, testRecords(30+i, 40, uint64(i))))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(batches))
	for g := range 8 {
		wg.Go(func() {
			for round := range 20 {
				b := batches[(g+round)%len(batches)]
				h, err := Validate(b, noLimits)
				if err == nil && h.NumRecords != int32(30+(g+round)%len(batches)) {
					t.Errorf("goroutine %d: %d records", g, h.NumRecords)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestValidateBoundsDecompressionByRatio(t *testing.T) {
	// At the real limits: small batches may inflate to 4 MiB, beyond that
	// only 256 times their size, never beyond 64 MiB.
	oneRec := []kmsg.Record{{}}
	zstdAttr := func(rb *kmsg.RecordBatch) { rb.Attributes = int16(CodecZstd) }
	snappyAttr := func(rb *kmsg.RecordBatch) { rb.Attributes = int16(CodecSnappy) }
	snappyAnnouncing := func(size uint64, pad int) []byte {
		blk := binary.AppendUvarint(nil, size)
		return append(blk, make([]byte, pad)...)
	}
	bombs := map[string][]byte{
		"zstd declared 64 MiB":   newBatchRaw(t, variants[0], oneRec, zstdRLEFrame(maxDecompressedDefault+1, true), zstdAttr),
		"zstd undeclared 64 MiB": newBatchRaw(t, variants[0], oneRec, zstdRLEFrame(maxDecompressedDefault+1, false), zstdAttr),
		"zstd undeclared 5 MiB":  newBatchRaw(t, variants[0], oneRec, zstdRLEFrame(5<<20, false), zstdAttr),
		"snappy 2 GiB":           newBatchRaw(t, variants[0], oneRec, snappyAnnouncing(1<<31, 1), snappyAttr),
		// 300 KiB compressed may inflate 75 MiB by ratio: the absolute cap
		// stops it. Never decoded, so the padding need not be valid.
		"snappy 64 MiB from 300 KiB": newBatchRaw(t, variants[0], oneRec, snappyAnnouncing(maxDecompressedDefault+1, 300<<10), snappyAttr),
	}
	for name, b := range bombs {
		start := time.Now()
		_, err := Validate(b, noLimits)
		wantErr(t, err, ErrCorrupt, kerr.CorruptMessage)
		t.Logf("%s (%d bytes): %v in %v", name, len(b), err, time.Since(start))
	}

	// An all-zero 3 MiB value compresses about 1000x and still passes: the
	// 4 MiB floor is for test payloads like this.
	rec := []kmsg.Record{{Value: make([]byte, 3<<20)}}
	for _, v := range variants[1:] {
		b := newBatch(t, v, rec)
		if _, err := Validate(b, noLimits); err != nil {
			t.Errorf("%s: %d-byte batch of a 3 MiB zero value: %v", v.name, len(b), err)
		}
	}
}

// zstdRLEFrame hand-builds a zstd frame of at least size zero bytes out of
// 128 KiB RLE blocks (4 bytes each), declaring its content size in the frame
// header or not (RFC 8878, section 3.1.1).
func zstdRLEFrame(size int, declareSize bool) []byte {
	const block = 128 << 10
	n := (size + block - 1) / block
	f := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	if declareSize {
		f = append(f, 0xE0) // 8-byte content size, single segment
		f = binary.LittleEndian.AppendUint64(f, uint64(n*block))
	} else {
		f = append(f, 0x00, 0x50) // no content size; window descriptor: 1 MiB
	}
	for i := range n {
		hdr := uint32(block)<<3 | 1<<1 // RLE block of 128 KiB
		if i == n-1 {
			hdr |= 1 // last block
		}
		f = append(f, byte(hdr), byte(hdr>>8), byte(hdr>>16), 0)
	}
	return f
}

func TestValidateZstdHugeWindowCostsNothing(t *testing.T) {
	// A 20-byte zstd stream declaring a 60 MiB window (exponent 15, mantissa
	// 7): klauspost's stream decoder would allocate the whole window up
	// front. DecodeAll keeps history in its output, so it costs nothing.
	frame := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	frame = append(frame, 0x00, 0x7F)
	hdr := uint32(16)<<3 | 1<<1 | 1 // last RLE block of 16 bytes
	frame = append(frame, byte(hdr), byte(hdr>>8), byte(hdr>>16), 'x')
	b := newBatchRaw(t, variants[0], []kmsg.Record{{}}, frame, func(rb *kmsg.RecordBatch) { rb.Attributes = int16(CodecZstd) })

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Validate(b, noLimits)
	runtime.ReadMemStats(&after)
	wantErr(t, err, ErrCorrupt, kerr.CorruptMessage)
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("rejecting a 60 MiB window allocated %d bytes", n)
	}
	if !strings.Contains(err.Error(), "record 0") {
		t.Errorf("a 60 MiB window (zstd's ultra levels) should decode; got %v", err)
	}

	// An 8 MiB window, zstd level 19's, too.
	frame[5] = 13 << 3
	b = newBatchRaw(t, variants[0], []kmsg.Record{{}}, frame, func(rb *kmsg.RecordBatch) { rb.Attributes = int16(CodecZstd) })
	_, err = Validate(b, noLimits)
	// The 16 bytes of 'x' are not a valid record; the point is that the
	// decoder accepted the window and the record walk rejected the content.
	wantErr(t, err, ErrCorrupt, kerr.CorruptMessage)
	if !strings.Contains(err.Error(), "record 0") {
		t.Errorf("an 8 MiB window should decode; got %v", err)
	}
}
