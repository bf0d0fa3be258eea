package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// noLimits disables every Now-relative timestamp check and the size limit.
var noLimits = Limits{TimestampBeforeMaxMs: -1, TimestampAfterMaxMs: -1}

// baseTs is the FirstTimestamp of test batches: 2026-01-01T00:00:00Z.
const baseTs = int64(1767225600000)

// variant is one way a producer may compress a batch. Snappy and zstd come
// twice: franz-go and librdkafka send a raw snappy block and a zstd frame
// that declares its size, Java clients xerial-framed snappy and a zstd
// stream without one (xerial and stream select those).
type variant struct {
	name   string
	codec  Codec
	xerial bool
	stream bool
}

var variants = []variant{
	{"none", CodecNone, false, false},
	{"gzip", CodecGzip, false, false},
	{"snappy", CodecSnappy, false, false},
	{"snappy-xerial", CodecSnappy, true, false},
	{"lz4", CodecLZ4, false, false},
	{"zstd", CodecZstd, false, false},
	{"zstd-stream", CodecZstd, false, true},
}

// testRecords returns n records as a franz-go producer numbers them (offset
// delta i, timestamps one millisecond apart), with a mix of null and empty
// keys and values and some headers, values of valueSize pseudo-random bytes
// drawn from a small alphabet so that they compress somewhat.
func testRecords(n, valueSize int, seed uint64) []kmsg.Record {
	rng := rand.New(rand.NewPCG(seed, 7))
	recs := make([]kmsg.Record, n)
	for i := range recs {
		r := &recs[i]
		r.OffsetDelta = int32(i)
		r.TimestampDelta64 = int64(i)
		switch i % 4 {
		case 0:
			r.Key = nil // null key
		case 1:
			r.Key = []byte{}
		default:
			r.Key = fmt.Appendf(nil, "key-%d", i)
		}
		if i%7 == 6 {
			r.Value = nil // tombstone
		} else {
			r.Value = make([]byte, valueSize)
			for j := range r.Value {
				r.Value[j] = "abcdefgh"[rng.IntN(8)]
			}
		}
		if i%3 == 2 {
			r.Headers = []kmsg.Header{{Key: "trace", Value: []byte("t-1")}, {Key: "null", Value: nil}}
		}
	}
	return recs
}

// encodeRecords appends the records with their Length fields computed.
func encodeRecords(recs []kmsg.Record) []byte {
	var raw []byte
	for i := range recs {
		r := recs[i]
		r.Length = 0
		body := r.AppendTo(nil)
		// AppendTo wrote Length 0 as a 1-byte varint; the rest is the body.
		r.Length = int32(len(body) - 1)
		raw = r.AppendTo(raw)
	}
	return raw
}

// compress compresses raw records the way producers do: franz-go's own
// compressors for gzip, raw snappy, lz4 and zstd, snappy-java's xerial
// framing (through klauspost's encoder, in small chunks so that several
// chunks appear) for the Java client.
func compress(tb testing.TB, v variant, raw []byte) []byte {
	tb.Helper()
	if v.codec == CodecNone {
		return raw
	}
	if v.xerial {
		out := xerialHeader[:8:8]
		out = append(out, 0, 0, 0, 1, 0, 0, 0, 1)
		for len(raw) > 0 {
			n := min(len(raw), 1000)
			block := xerial.Encode(nil, raw[:n]) // a whole xerial stream: strip its header
			out = append(out, block[16:]...)
			raw = raw[n:]
		}
		return out
	}
	if v.stream {
		var out bytes.Buffer
		zw, err := zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1))
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := zw.Write(raw); err != nil {
			tb.Fatal(err)
		}
		// Flushing before Close keeps the encoder from writing the whole
		// frame at once, with its size, as it does for small inputs.
		if err := zw.Flush(); err != nil {
			tb.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			tb.Fatal(err)
		}
		var fh zstd.Header
		if err := fh.Decode(out.Bytes()); err != nil || fh.HasFCS {
			tb.Fatalf("zstd stream declares its size (%v) or is broken: %v", fh.HasFCS, err)
		}
		return out.Bytes()
	}
	codecs := map[Codec]kgo.CompressionCodec{
		CodecGzip:   kgo.GzipCompression(),
		CodecSnappy: kgo.SnappyCompression(),
		CodecLZ4:    kgo.Lz4Compression(),
		CodecZstd:   kgo.ZstdCompression(),
	}
	c, err := kgo.DefaultCompressor(codecs[v.codec])
	if err != nil {
		tb.Fatal(err)
	}
	out, typ := c.Compress(new(bytes.Buffer), raw)
	if Codec(typ) != v.codec {
		tb.Fatalf("franz-go compressed with codec %d, want %d", typ, v.codec)
	}
	return bytes.Clone(out)
}

// newBatch builds a valid batch of recs compressed as v, the way a producer
// would, then applies mods to the header before computing Length and the CRC
// (so mods produce batches with a correct CRC but wrong content).
func newBatch(tb testing.TB, v variant, recs []kmsg.Record, mods ...func(*kmsg.RecordBatch)) []byte {
	tb.Helper()
	return newBatchRaw(tb, v, recs, encodeRecords(recs), mods...)
}

// newBatchRaw is newBatch with the uncompressed record bytes given, so that
// tests can hand-craft broken records.
func newBatchRaw(tb testing.TB, v variant, recs []kmsg.Record, raw []byte, mods ...func(*kmsg.RecordBatch)) []byte {
	tb.Helper()
	maxDelta := int64(0)
	for i, r := range recs {
		if i == 0 || r.TimestampDelta64 > maxDelta {
			maxDelta = r.TimestampDelta64
		}
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           int16(v.codec),
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       baseTs,
		MaxTimestamp:         baseTs + maxDelta,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              compress(tb, v, raw),
	}
	for _, m := range mods {
		m(&rb)
	}
	rb.Length = int32(len(rb.Records) + HeaderSize - 12)
	b := rb.AppendTo(nil)
	fixCRC(b)
	return b
}

// fixCRC recomputes the CRC of a whole batch with the standard library
// directly, independently of Checksum.
func fixCRC(b []byte) {
	sum := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(b[17:], sum)
}

// wantErr fails unless err wraps both the sentinel and the Kafka error.
func wantErr(tb testing.TB, err, sentinel error, code *kerr.Error) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("no error, want %v (%s)", sentinel, code.Message)
	}
	if !errors.Is(err, sentinel) {
		tb.Fatalf("error %q does not wrap %q", err, sentinel)
	}
	if !errors.Is(err, code) {
		tb.Fatalf("error %q does not wrap kerr.%s", err, code.Message)
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke != code {
		tb.Fatalf("errors.As(%q) gave %v, want kerr.%s", err, ke, code.Message)
	}
}

// collect returns copies of the records Records hands out.
func collect(tb testing.TB, b []byte) ([]kmsg.Record, error) {
	tb.Helper()
	var out []kmsg.Record
	err := Records(b, func(r Record) error {
		kr := kmsg.Record{
			OffsetDelta:      r.OffsetDelta,
			TimestampDelta64: r.TimestampDelta,
			Key:              bytes.Clone(r.Key),
			Value:            bytes.Clone(r.Value),
		}
		if r.KeyNull != (r.Key == nil) || r.ValueNull != (r.Value == nil) {
			tb.Errorf("record %d: null flags %v/%v with key %q value %q", r.OffsetDelta, r.KeyNull, r.ValueNull, r.Key, r.Value)
		}
		if !r.KeyNull && kr.Key == nil {
			kr.Key = []byte{}
		}
		if !r.ValueNull && kr.Value == nil {
			kr.Value = []byte{}
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: bytes.Clone(h.Value)})
		}
		out = append(out, kr)
		return nil
	})
	return out, err
}
