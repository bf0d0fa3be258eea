package batch

import (
	"bytes"
	"encoding/binary"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kbin"
)

// Builder re-encodes a v2 batch from a subset of its records: log
// compaction ([storage] cleaner) keeps the newest record per key and writes
// each surviving batch again. It is the only writer of batch bytes in
// Strata; everything else stores producers' bytes untouched.
//
// What the rebuilt batch keeps from the original header (h):
//
//	baseOffset, partitionLeaderEpoch, attributes (codec, timestamp type,
//	transactional, control), lastOffsetDelta, baseTimestamp, producerId,
//	producerEpoch, baseSequence
//
// so offsets keep their numbers (compaction leaves gaps in offset deltas),
// and an idempotent producer's sequence range, which the broker derives
// from baseSequence + lastOffsetDelta, stays what it was. recordCount and
// batchLength are recomputed, maxTimestamp too for CreateTime batches with
// records (the largest kept record timestamp; LogAppendTime batches and
// empty batches keep the original), and the CRC-32C last. A batch with no
// records (kept only for its producer state) has recordCount 0, as Kafka's
// cleaner writes it.
//
// Compression uses the original codec: gzip (klauspost), snappy in
// xerial framing (what Kafka's Java producer and broker write; 32 KiB
// blocks), lz4 frame (pierrec), zstd (klauspost).
//
// A Builder is not safe for concurrent use; reuse one with [Builder.Reset].
type Builder struct {
	h     Header
	recs  []byte // encoded records, uncompressed
	n     int32
	maxTS int64
	comp  bytes.Buffer
}

// NewBuilder returns a builder for a batch with header h.
func NewBuilder(h Header) *Builder {
	b := &Builder{}
	b.Reset(h)
	return b
}

// Reset starts a new batch with header h, keeping the buffers.
func (b *Builder) Reset(h Header) {
	b.h = h
	b.recs = b.recs[:0]
	b.n = 0
	b.maxTS = -1
}

// Add appends one record, encoded as drawn in batch.go. The record's bytes
// are copied: r may alias an iterator's buffer (see [Records]).
func (b *Builder) Add(r Record) {
	body := make([]byte, 0, 16+len(r.Key)+len(r.Value))
	body = append(body, 0) // attributes
	body = kbin.AppendVarlong(body, r.TimestampDelta)
	body = kbin.AppendVarint(body, r.OffsetDelta)
	body = appendNullable(body, r.Key, r.KeyNull)
	body = appendNullable(body, r.Value, r.ValueNull)
	body = kbin.AppendVarint(body, int32(len(r.Headers)))
	for _, rh := range r.Headers {
		body = kbin.AppendVarintString(body, rh.Key)
		body = appendNullable(body, rh.Value, rh.Value == nil)
	}
	b.recs = kbin.AppendVarint(b.recs, int32(len(body)))
	b.recs = append(b.recs, body...)
	if ts := b.h.FirstTimestamp + r.TimestampDelta; b.n == 0 || ts > b.maxTS {
		b.maxTS = ts
	}
	b.n++
}

func appendNullable(dst, v []byte, null bool) []byte {
	if null {
		return kbin.AppendVarint(dst, -1)
	}
	return kbin.AppendVarintBytes(dst, v)
}

// AppendTo appends the finished batch to dst and returns it. It fails only
// when the codec is unknown ([ErrCompression]) or a compressor fails.
func (b *Builder) AppendTo(dst []byte) ([]byte, error) {
	data := b.recs
	if c := b.h.Codec(); c != CodecNone && b.n > 0 {
		b.comp.Reset()
		if err := compressRecords(&b.comp, c, b.recs); err != nil {
			return dst, err
		}
		data = b.comp.Bytes()
	}
	start := len(dst)
	var hdr [HeaderSize]byte
	dst = append(dst, hdr[:]...)
	dst = append(dst, data...)
	out := dst[start:]
	maxTS := b.h.MaxTimestamp
	if b.n > 0 && b.h.TimestampType() == CreateTime {
		maxTS = b.maxTS
	}
	be := binary.BigEndian
	be.PutUint64(out[offBaseOffset:], uint64(b.h.BaseOffset))
	be.PutUint32(out[offLength:], uint32(len(out)-lengthOverhead))
	be.PutUint32(out[offLeaderEpoch:], uint32(b.h.PartitionLeaderEpoch))
	out[offMagic] = Magic
	be.PutUint16(out[offAttributes:], uint16(b.h.Attributes))
	be.PutUint32(out[offLastOffsetDelta:], uint32(b.h.LastOffsetDelta))
	be.PutUint64(out[offFirstTimestamp:], uint64(b.h.FirstTimestamp))
	be.PutUint64(out[offMaxTimestamp:], uint64(maxTS))
	be.PutUint64(out[offProducerID:], uint64(b.h.ProducerID))
	be.PutUint16(out[offProducerEpoch:], uint16(b.h.ProducerEpoch))
	be.PutUint32(out[offBaseSequence:], uint32(b.h.BaseSequence))
	be.PutUint32(out[offNumRecords:], uint32(b.n))
	be.PutUint32(out[offCRC:], Checksum(out))
	return dst, nil
}

// xerialStart opens a xerial-framed snappy stream (drawn in compress.go):
// magic, version 1, compatible version 1.
var xerialStart = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

// xerialBlock is the uncompressed block size Kafka's Java client uses.
const xerialBlock = 32 << 10

// Compressors are pooled: a gzip writer costs about 1 MiB to set up.
var (
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	lz4Writers  = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}
)

var zstdEnc = sync.OnceValue(func() *zstd.Encoder {
	e, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	return e
})

func compressRecords(w *bytes.Buffer, c Codec, src []byte) error {
	switch c {
	case CodecGzip:
		zw := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(zw)
		zw.Reset(w)
		if _, err := zw.Write(src); err != nil {
			return errf(ErrCompression, "gzip: %v", err)
		}
		if err := zw.Close(); err != nil {
			return errf(ErrCompression, "gzip: %v", err)
		}
	case CodecSnappy:
		w.Write(xerialStart)
		for len(src) > 0 {
			n := min(len(src), xerialBlock)
			blk := s2.EncodeSnappy(nil, src[:n])
			var l [4]byte
			binary.BigEndian.PutUint32(l[:], uint32(len(blk)))
			w.Write(l[:])
			w.Write(blk)
			src = src[n:]
		}
	case CodecLZ4:
		zw := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(zw)
		zw.Reset(w)
		if _, err := zw.Write(src); err != nil {
			return errf(ErrCompression, "lz4: %v", err)
		}
		if err := zw.Close(); err != nil {
			return errf(ErrCompression, "lz4: %v", err)
		}
	case CodecZstd:
		w.Write(zstdEnc().EncodeAll(src, nil))
	default:
		return errf(ErrCompression, "codec %d", int8(c))
	}
	return nil
}

// CheckStored checks one whole batch b read back from a log, which may
// have been compacted: magic, framing, CRC-32C, codec and attribute bits,
// LastOffsetDelta >= NumRecords-1 >= -1, and every record's framing with
// offset deltas strictly increasing within [0, LastOffsetDelta]. Unlike
// [Validate] it accepts gaps in offset deltas and batches without records
// (compaction output), and checks no timestamps. Errors wrap [ErrCorrupt],
// [ErrTruncated], [ErrMagic], [ErrCompression] or [ErrInvalidRecord].
func CheckStored(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if err := checkSize(h, b); err != nil {
		return h, err
	}
	if sum := Checksum(b); sum != h.CRC {
		return h, errf(ErrCorrupt, "crc32c %08x, header says %08x", sum, h.CRC)
	}
	if c := h.Codec(); c > CodecZstd {
		return h, errf(ErrCompression, "codec %d", int8(c))
	}
	if h.Attributes&^attrKnownBits != 0 {
		return h, errf(ErrCorrupt, "unknown attribute bits %#04x", uint16(h.Attributes&^attrKnownBits))
	}
	if h.NumRecords < 0 || h.LastOffsetDelta < 0 || int64(h.LastOffsetDelta) < int64(h.NumRecords)-1 {
		return h, errf(ErrInvalidRecord, "last offset delta %d with %d records", h.LastOffsetDelta, h.NumRecords)
	}
	if h.NumRecords == 0 {
		if len(b) != HeaderSize && h.Codec() == CodecNone {
			return h, errf(ErrInvalidRecord, "%d trailing bytes in an empty batch", len(b)-HeaderSize)
		}
		return h, nil
	}
	prev := int32(-1)
	err = Records(b, func(r Record) error {
		if r.OffsetDelta <= prev || r.OffsetDelta > h.LastOffsetDelta {
			return errf(ErrInvalidRecord, "offset delta %d after %d (last %d)", r.OffsetDelta, prev, h.LastOffsetDelta)
		}
		prev = r.OffsetDelta
		return nil
	})
	return h, err
}
