package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka record batch, format v2 (magic 2). All integers are big endian.
//
//	offset  size  field
//	     0     8  baseOffset            int64   patched in place by the leader ([SetBaseOffset])
//	     8     4  batchLength           int32   bytes after this field: Size() = 12 + batchLength
//	    12     4  partitionLeaderEpoch  int32   patched in place ([SetPartitionLeaderEpoch])
//	    16     1  magic                 int8    must be 2 (same position in v0/v1, so it is read first)
//	    17     4  crc                   uint32  CRC-32C (Castagnoli) of bytes [21, Size())
//	    21     2  attributes            int16   --- everything from here on is covered by the CRC ---
//	    23     4  lastOffsetDelta       int32
//	    27     8  baseTimestamp         int64   ("firstTimestamp")
//	    35     8  maxTimestamp          int64   rewritten for LogAppendTime ([SetLogAppendTime])
//	    43     8  producerId            int64   -1 when not idempotent
//	    51     2  producerEpoch         int16
//	    53     4  baseSequence          int32
//	    57     4  recordCount           int32
//	    61     .  records               recordCount records, compressed as one block when codec != none
//
// attributes:
//
//	bit  0-2  compression codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (5-7 unknown)
//	bit    3  timestamp type: 0 CreateTime, 1 LogAppendTime
//	bit    4  transactional
//	bit    5  control batch
//	bit    6  delete horizon set (KIP-534, written by compaction only)
//	bit 7-15  unused, must be zero
//
// One record (varint = zig-zag LEB128 int32, varlong = zig-zag LEB128 int64):
//
//	length          varint   bytes of the record after this field
//	attributes      int8     unused
//	timestampDelta  varlong  record timestamp = baseTimestamp + timestampDelta
//	offsetDelta     varint   record offset = baseOffset + offsetDelta
//	keyLength       varint   -1 = null key
//	key             bytes
//	valueLength     varint   -1 = null value
//	value           bytes
//	headerCount     varint
//	headers         headerCount x { keyLength varint (>= 0), key, valueLength varint (-1 = null), value }

// HeaderSize is the size in bytes of a v2 record batch header, up to and
// including recordCount; the records start at this offset.
const HeaderSize = 61

// Magic is the only record batch format version this package understands.
const Magic = 2

// Byte offsets of the header fields, as drawn above.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// lengthOverhead is the part of the batch that batchLength does not count.
	lengthOverhead = offLength + 4
	// minLength is the smallest sane batchLength: a header without records.
	minLength = HeaderSize - lengthOverhead
)

// Attribute bits.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
	attrDeleteHorizon = 0x40
	attrKnownBits     = attrCodecMask | attrLogAppendTime | attrTransactional | attrControl | attrDeleteHorizon
)

// Codec is the compression codec of a batch, attributes bits 0-2.
type Codec int8

// Compression codecs Kafka defines; values 5-7 are rejected by [Validate].
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

// String returns Kafka's name for the codec.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// TimestampType says what a batch's timestamps mean, attributes bit 3.
type TimestampType int8

// Timestamp types.
const (
	CreateTime    TimestampType = 0 // set by the producer
	LogAppendTime TimestampType = 1 // set by the broker on append; MaxTimestamp holds it
)

// Errors. Every error this package returns wraps one of these, and each of
// these wraps the franz-go kerr error the broker answers with, so both
// errors.Is(err, ErrCorrupt) and errors.Is(err, kerr.CorruptMessage) hold.
var (
	// ErrCorrupt is returned for a batch whose bytes cannot be trusted: CRC
	// mismatch, impossible lengths, broken record framing, undecodable
	// compressed data. Wraps kerr.CorruptMessage.
	ErrCorrupt error = &kindError{msg: "batch: corrupt record batch", code: kerr.CorruptMessage}
	// ErrTruncated is returned by [Split], [ParseHeader] and [Validate] when
	// the buffer ends inside a batch (a torn tail on disk, a short read).
	// Wraps io.ErrUnexpectedEOF and kerr.CorruptMessage.
	ErrTruncated error = &kindError{msg: "batch: truncated record batch", code: kerr.CorruptMessage, extra: io.ErrUnexpectedEOF}
	// ErrInvalidRecord is returned by [Validate] and [Records] for a batch that
	// is well framed but whose content breaks the rules: record count against
	// the records present, offset deltas, producer fields, attributes.
	// Wraps kerr.InvalidRecord.
	ErrInvalidRecord error = &kindError{msg: "batch: invalid record", code: kerr.InvalidRecord}
	// ErrTooLarge is returned by [Validate] for a batch above
	// [Limits.MaxBatchBytes]. Wraps kerr.MessageTooLarge.
	ErrTooLarge error = &kindError{msg: "batch: record batch too large", code: kerr.MessageTooLarge}
	// ErrMagic is returned by [ParseHeader], [Validate] and [Records] for a
	// batch whose magic is not 2. Wraps kerr.UnsupportedForMessageFormat.
	ErrMagic error = &kindError{msg: "batch: unsupported magic", code: kerr.UnsupportedForMessageFormat}
	// ErrTimestamp is returned by [Validate] for timestamps outside the
	// [Limits] or inconsistent with the batch's MaxTimestamp.
	// Wraps kerr.InvalidTimestamp.
	ErrTimestamp error = &kindError{msg: "batch: invalid timestamp", code: kerr.InvalidTimestamp}
	// ErrCompression is returned by [Validate] and [Records] for codec values
	// 5-7. Wraps kerr.UnsupportedCompressionType.
	ErrCompression error = &kindError{msg: "batch: unsupported compression codec", code: kerr.UnsupportedCompressionType}
)

// kindError is a sentinel error that also matches the Kafka error code (and
// possibly a standard error such as io.ErrUnexpectedEOF) it stands for.
type kindError struct {
	msg   string
	code  *kerr.Error
	extra error
}

func (e *kindError) Error() string { return e.msg }

func (e *kindError) Unwrap() []error {
	if e.extra != nil {
		return []error{e.code, e.extra}
	}
	return []error{e.code}
}

// errf builds a returned error: "<sentinel message>: <detail>".
func errf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
}

// Header is the decoded fixed part of a v2 record batch.
type Header struct {
	BaseOffset           int64
	Length               int32 // batchLength: bytes after the Length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// ParseHeader decodes the header at the start of b, which must hold at least
// [HeaderSize] bytes (else [ErrTruncated]). It checks the magic ([ErrMagic])
// and that Length covers at least a header ([ErrCorrupt]); it does not look
// at the CRC or the records, and b may extend past the batch.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		if len(b) > offMagic && int8(b[offMagic]) != Magic {
			return Header{}, errf(ErrMagic, "magic %d", int8(b[offMagic]))
		}
		return Header{}, errf(ErrTruncated, "header needs %d bytes, have %d", HeaderSize, len(b))
	}
	h := Header{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		Length:               int32(binary.BigEndian.Uint32(b[offLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:       int64(binary.BigEndian.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(binary.BigEndian.Uint32(b[offNumRecords:])),
	}
	if h.Magic != Magic {
		return h, errf(ErrMagic, "magic %d", h.Magic)
	}
	if h.Length < minLength {
		return h, errf(ErrCorrupt, "batch length %d below the %d-byte header", h.Length, minLength)
	}
	return h, nil
}

// Size is the whole batch size in bytes, 12 + Length.
func (h Header) Size() int { return lengthOverhead + int(h.Length) }

// LastOffset is the offset of the batch's last record, BaseOffset + LastOffsetDelta.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec is the compression codec, attributes bits 0-2.
func (h Header) Codec() Codec { return Codec(h.Attributes & attrCodecMask) }

// TimestampType is attributes bit 3.
func (h Header) TimestampType() TimestampType {
	if h.Attributes&attrLogAppendTime != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// Transactional reports attributes bit 4.
func (h Header) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports attributes bit 5: the batch holds a transaction marker.
func (h Header) Control() bool { return h.Attributes&attrControl != 0 }

// HasProducerID reports whether the batch was written by an idempotent or
// transactional producer (ProducerID >= 0).
func (h Header) HasProducerID() bool { return h.ProducerID >= 0 }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum computes the CRC-32C (Castagnoli) that a v2 batch stores at byte
// 17: the checksum of b[21:]. b must be exactly one batch. Checksum and the
// Set functions index the header directly and panic on a b too short for the
// fields they touch: call them on batches [Split] or [Validate] accepted.
func Checksum(b []byte) uint32 { return crc32.Checksum(b[offAttributes:], castagnoli) }

// SetBaseOffset writes base into the batch header of b in place. The CRC does not
// cover the base offset, so it stays valid.
func SetBaseOffset(b []byte, base int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(base))
}

// SetPartitionLeaderEpoch writes epoch into the batch header in place. The CRC
// does not cover it, so it stays valid.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime turns one whole batch b into a LogAppendTime batch in
// place, as Kafka does for message.timestamp.type=LogAppendTime: it sets the
// timestamp-type bit, writes ts into MaxTimestamp (readers then take it as
// every record's timestamp) and recomputes the CRC. FirstTimestamp and the
// records are untouched, so a compressed batch is never recompressed.
func SetLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	binary.BigEndian.PutUint16(b[offAttributes:], attrs|attrLogAppendTime)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[offCRC:], Checksum(b))
}

// Split returns the first whole batch of the record set b and the bytes after
// it, judged by the length field alone (no magic or CRC check; see
// [Validate]). An empty b returns io.EOF. A b that starts with a partial batch
// returns an error wrapping [ErrTruncated] (and so io.ErrUnexpectedEOF); a
// length field too small for a header returns [ErrCorrupt].
func Split(b []byte) (first, rest []byte, err error) {
	if len(b) == 0 {
		return nil, nil, io.EOF
	}
	if len(b) < lengthOverhead {
		return nil, b, errf(ErrTruncated, "%d bytes, too short for a length field", len(b))
	}
	length := int32(binary.BigEndian.Uint32(b[offLength:]))
	if length < minLength {
		return nil, b, errf(ErrCorrupt, "batch length %d below the %d-byte header", length, minLength)
	}
	size := lengthOverhead + int(length)
	if len(b) < size {
		return nil, b, errf(ErrTruncated, "batch of %d bytes, have %d", size, len(b))
	}
	return b[:size:size], b[size:], nil
}
