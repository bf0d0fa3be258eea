package batch

// Limits are the broker and topic settings [Validate] enforces.
//
// The zero value is strict about timestamps: TimestampBeforeMaxMs and
// TimestampAfterMaxMs of 0 accept only record timestamps equal to Now. Set
// them to -1 (or set SkipTimestampCheck) to disable those checks.
type Limits struct {
	// MaxBatchBytes is max.message.bytes: the largest whole batch, in bytes,
	// as Kafka measures it (compressed size, header included). <= 0 means no
	// limit.
	MaxBatchBytes int
	// Now is the broker's clock in milliseconds since the epoch, for the
	// timestamp checks.
	Now int64
	// TimestampBeforeMaxMs is log.message.timestamp.before.max.ms: how far
	// a CreateTime record may lie in the past of Now. < 0 disables the check
	// (Kafka's default is Long.MAX_VALUE, which never fails either).
	TimestampBeforeMaxMs int64
	// TimestampAfterMaxMs is log.message.timestamp.after.max.ms: how far a
	// CreateTime record may lie in the future of Now. < 0 disables the check.
	TimestampAfterMaxMs int64
	// SkipTimestampCheck disables every timestamp check, the Now-relative
	// ones and MaxTimestamp against the records, e.g. for LogAppendTime
	// topics, where the broker overwrites MaxTimestamp anyway.
	SkipTimestampCheck bool
}

// noTimestamp is Kafka's RecordBatch.NO_TIMESTAMP: exempt from the limits.
const noTimestamp = -1

// Validate checks the one whole batch b (len(b) must equal its Size()) the
// way a Kafka leader checks a produced batch, before anything touches disk:
//
//   - magic 2 ([ErrMagic]);
//   - the length field against the buffer ([ErrTruncated], [ErrCorrupt]);
//   - the size limit ([ErrTooLarge]);
//   - the CRC-32C ([ErrCorrupt]);
//   - attributes: codec 5-7 ([ErrCompression]), bits 7-15 ([ErrCorrupt]);
//   - batch fields as Kafka's LogValidator: NumRecords > 0, LastOffsetDelta
//     == NumRecords-1, a transactional batch has a producer id, a producer id
//     comes with a sequence >= 0 ([ErrInvalidRecord]);
//   - every record's varint framing ([ErrCorrupt]), after decompressing
//     gzip, snappy (raw or xerial-framed), lz4 (frame) or zstd into a pooled
//     buffer ([ErrCorrupt] when undecodable, or when the records inflate
//     beyond max(4 MiB, 256 x compressed size), capped at 64 MiB);
//   - the records present number exactly NumRecords, and record i has
//     offset delta i ([ErrInvalidRecord]);
//   - for CreateTime batches, unless [Limits.SkipTimestampCheck]:
//     MaxTimestamp equals the largest record timestamp, and every record
//     timestamp other than -1 is within the [Limits] around Now
//     ([ErrTimestamp]).
//
// It returns the parsed header, and never modifies b. Validate is safe for
// concurrent use; for an uncompressed batch it does not allocate (except to
// build a returned error).
//
// Differences from Kafka's LogValidator, because Strata stores batches byte
// for byte and never recompresses: Kafka rewrites a wrong MaxTimestamp, and
// recompresses a compressed batch whose offset deltas are not 0..n-1; Validate
// rejects both. Kafka ignores attribute bits 7-15; Validate rejects them.
//
// Left to the broker, since the header carries everything it needs: Kafka
// refuses client batches that are control batches (INVALID_RECORD) or that
// already carry LogAppendTime (INVALID_TIMESTAMP), null keys on compacted
// topics ([Records]), and producer sequence and epoch checks. Validate itself
// accepts LogAppendTime batches, so a batch can be re-checked after
// [SetLogAppendTime]. It is the produce-path check: a batch read back from a
// compacted log (gaps in offset deltas, possibly no records) fails it; use
// [ParseHeader], [Checksum] and [Records] there.
func Validate(b []byte, lim Limits) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if err := checkSize(h, b); err != nil {
		return h, err
	}
	if lim.MaxBatchBytes > 0 && len(b) > lim.MaxBatchBytes {
		return h, errf(ErrTooLarge, "batch of %d bytes above max.message.bytes %d", len(b), lim.MaxBatchBytes)
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
	if h.NumRecords <= 0 {
		return h, errf(ErrInvalidRecord, "record count %d", h.NumRecords)
	}
	if int64(h.LastOffsetDelta) != int64(h.NumRecords)-1 {
		return h, errf(ErrInvalidRecord, "last offset delta %d with %d records", h.LastOffsetDelta, h.NumRecords)
	}
	if h.Transactional() && !h.HasProducerID() {
		return h, errf(ErrInvalidRecord, "transactional batch without a producer id")
	}
	if h.HasProducerID() && h.BaseSequence < 0 {
		return h, errf(ErrInvalidRecord, "producer id %d with base sequence %d", h.ProducerID, h.BaseSequence)
	}
	// Each record takes at least 7 bytes uncompressed (a length and six
	// one-byte fields); an uncompressed batch claiming more records than fit
	// is rejected before walking it.
	if h.Codec() == CodecNone && int64(h.NumRecords) > int64(len(b)-HeaderSize)/minRecordSize {
		return h, errf(ErrInvalidRecord, "%d records cannot fit in %d bytes", h.NumRecords, len(b)-HeaderSize)
	}

	data, buf, err := recordData(h, b)
	if err != nil {
		return h, err
	}
	err = checkRecords(h, data, lim)
	putBuf(buf)
	return h, err
}

// minRecordSize is the smallest encoded record: length, attributes,
// timestampDelta, offsetDelta, key length, value length, header count.
const minRecordSize = 7

// checkRecords walks the (uncompressed) records of batch h without
// allocating: framing, count, offset deltas and timestamps.
func checkRecords(h Header, data []byte, lim Limits) error {
	var (
		rec   Record
		pos   int
		n     int32
		maxTs int64
	)
	checkMax := h.TimestampType() == CreateTime && !lim.SkipTimestampCheck
	checkLimits := checkMax && (lim.TimestampBeforeMaxMs >= 0 || lim.TimestampAfterMaxMs >= 0)
	for pos < len(data) {
		if n == h.NumRecords {
			return errf(ErrInvalidRecord, "%d trailing bytes after the %d records the header declares", len(data)-pos, h.NumRecords)
		}
		adv, err := readRecord(data[pos:], &rec, false)
		if err != nil {
			return recordErr(err, n, pos)
		}
		if rec.OffsetDelta != n {
			return errf(ErrInvalidRecord, "record %d has offset delta %d", n, rec.OffsetDelta)
		}
		// Kafka adds the delta with wrapping long arithmetic; so do we.
		ts := h.FirstTimestamp + rec.TimestampDelta
		if n == 0 || ts > maxTs {
			maxTs = ts
		}
		if checkLimits && ts != noTimestamp {
			if err := checkTimestamp(ts, n, lim); err != nil {
				return err
			}
		}
		pos += adv
		n++
	}
	if n != h.NumRecords {
		return errf(ErrInvalidRecord, "header declares %d records, batch holds %d", h.NumRecords, n)
	}
	if checkMax && maxTs != h.MaxTimestamp {
		return errf(ErrTimestamp, "max timestamp %d, records' largest is %d", h.MaxTimestamp, maxTs)
	}
	return nil
}

// checkTimestamp applies log.message.timestamp.{before,after}.max.ms to the
// timestamp of record i. The differences are taken in uint64 so that extreme
// timestamps cannot overflow into passing.
func checkTimestamp(ts int64, i int32, lim Limits) error {
	if lim.TimestampBeforeMaxMs >= 0 && ts < lim.Now &&
		uint64(lim.Now)-uint64(ts) > uint64(lim.TimestampBeforeMaxMs) {
		return errf(ErrTimestamp, "record %d timestamp %d is more than %d ms before now %d", i, ts, lim.TimestampBeforeMaxMs, lim.Now)
	}
	if lim.TimestampAfterMaxMs >= 0 && ts > lim.Now &&
		uint64(ts)-uint64(lim.Now) > uint64(lim.TimestampAfterMaxMs) {
		return errf(ErrTimestamp, "record %d timestamp %d is more than %d ms after now %d", i, ts, lim.TimestampAfterMaxMs, lim.Now)
	}
	return nil
}
