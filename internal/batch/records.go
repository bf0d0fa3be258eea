package batch

import (
	"github.com/twmb/franz-go/pkg/kbin"
)

// Record is one decoded record of a batch, as [Records] hands it to its
// callback. Key, Value and the header values alias a buffer owned by the
// iterator (the batch itself, or a pooled decompression buffer): they are
// valid only during the callback, and must be copied to be kept.
//
// Its offset is the batch's BaseOffset + OffsetDelta. Its timestamp is
// FirstTimestamp + TimestampDelta in a CreateTime batch, and the batch's
// MaxTimestamp in a LogAppendTime batch (as Kafka's consumers read it).
type Record struct {
	OffsetDelta    int32
	TimestampDelta int64
	Key, Value     []byte
	KeyNull        bool // the key length was -1; Key is nil
	ValueNull      bool // the value length was -1 (a tombstone); Value is nil
	Headers        []RecordHeader
}

// RecordHeader is one record header. Key is a copy; Value aliases the
// iterator's buffer like [Record.Value].
type RecordHeader struct {
	Key   string
	Value []byte
}

// Records decodes the records of the one whole batch b (len(b) must equal its
// Size()), decompressing them when the batch is compressed, and calls fn for
// each in order. It stops at fn's first error and returns it unchanged.
//
// Records checks framing, not policy: it does not verify the CRC, offset
// deltas or timestamps (compacted batches legitimately have gaps in their
// offset deltas), so call [Validate] first on untrusted input. It returns
// [ErrCorrupt] for broken framing and [ErrInvalidRecord] when the records
// present do not number NumRecords.
func Records(b []byte, fn func(Record) error) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if err := checkSize(h, b); err != nil {
		return err
	}
	if h.NumRecords == 0 && len(b) == HeaderSize {
		// An empty batch compaction kept for its producer state: Kafka
		// writes no record bytes at all, even with a codec set.
		return nil
	}
	data, buf, err := recordData(h, b)
	if err != nil {
		return err
	}
	defer putBuf(buf)

	var (
		rec  Record
		hdrs []RecordHeader
		pos  int
		n    int32
	)
	for pos < len(data) {
		if n == h.NumRecords {
			return errf(ErrInvalidRecord, "%d trailing bytes after the %d records the header declares", len(data)-pos, h.NumRecords)
		}
		rec = Record{Headers: hdrs[:0]}
		adv, err := readRecord(data[pos:], &rec, true)
		if err != nil {
			return recordErr(err, n, pos)
		}
		hdrs = rec.Headers
		pos += adv
		n++
		if err := fn(rec); err != nil {
			return err
		}
	}
	if n != h.NumRecords {
		return errf(ErrInvalidRecord, "header declares %d records, batch holds %d", h.NumRecords, n)
	}
	return nil
}

// checkSize ensures b is exactly the batch h describes.
func checkSize(h Header, b []byte) error {
	switch size := h.Size(); {
	case len(b) < size:
		return errf(ErrTruncated, "batch of %d bytes, have %d", size, len(b))
	case len(b) > size:
		return errf(ErrCorrupt, "batch of %d bytes given a %d-byte buffer", size, len(b))
	}
	return nil
}

// recordErr adds the record's position to a framing error.
func recordErr(err error, i int32, pos int) error {
	return errf(ErrCorrupt, "record %d at byte %d of the records: %v", i, pos, err)
}

// framingError describes what is wrong inside one record; recordErr turns
// it into an ErrCorrupt error. A plain string type keeps the hot path free of
// allocations: the error values are constants.
type framingError string

func (e framingError) Error() string { return string(e) }

const (
	errRecLength    framingError = "bad record length"
	errRecVarint    framingError = "truncated or overlong varint"
	errRecKey       framingError = "bad key length"
	errRecValue     framingError = "bad value length"
	errRecHdrCount  framingError = "bad header count"
	errRecHdrKey    framingError = "bad header key length"
	errRecHdrValue  framingError = "bad header value length"
	errRecTrailing  framingError = "record length does not match its fields"
	errRecTruncated framingError = "record runs past the end of the batch"
)

// readRecord decodes the record at the start of data into rec and returns
// how many bytes it spans. Header keys and values are decoded only when
// wantHeaders is set (appended to rec.Headers); otherwise they are only
// checked for framing, without allocating. Errors are framingError values.
func readRecord(data []byte, rec *Record, wantHeaders bool) (int, error) {
	length, n := kbin.Varint(data)
	if n <= 0 {
		return 0, errRecVarint
	}
	if length <= 0 {
		return 0, errRecLength
	}
	if int(length) > len(data)-n {
		return 0, errRecTruncated
	}
	total := n + int(length)
	body := data[n:total]

	// attributes int8: unused by Kafka, skipped.
	p := 1
	if len(body) < p {
		return 0, errRecTruncated
	}
	tsDelta, n := kbin.Varlong(body[p:])
	if n <= 0 {
		return 0, errRecVarint
	}
	p += n
	offDelta, n := kbin.Varint(body[p:])
	if n <= 0 {
		return 0, errRecVarint
	}
	p += n
	rec.TimestampDelta = tsDelta
	rec.OffsetDelta = offDelta

	var err error
	if rec.Key, rec.KeyNull, p, err = readBytes(body, p, errRecKey); err != nil {
		return 0, err
	}
	if rec.Value, rec.ValueNull, p, err = readBytes(body, p, errRecValue); err != nil {
		return 0, err
	}

	count, n := kbin.Varint(body[p:])
	if n <= 0 {
		return 0, errRecVarint
	}
	p += n
	// Each header takes at least two bytes, so a count beyond that is a lie
	// we can reject before looping.
	if count < 0 || int(count) > (len(body)-p)/2 {
		return 0, errRecHdrCount
	}
	for range count {
		klen, n := kbin.Varint(body[p:])
		if n <= 0 {
			return 0, errRecVarint
		}
		p += n
		if klen < 0 || int(klen) > len(body)-p {
			return 0, errRecHdrKey
		}
		key := body[p : p+int(klen)]
		p += int(klen)
		var val []byte
		if val, _, p, err = readBytes(body, p, errRecHdrValue); err != nil {
			return 0, err
		}
		if wantHeaders {
			rec.Headers = append(rec.Headers, RecordHeader{Key: string(key), Value: val})
		}
	}
	if p != len(body) {
		return 0, errRecTrailing
	}
	return total, nil
}

// readBytes reads a varint-length-prefixed byte string (-1 = null) at
// body[p:], returning it, whether it was null, and the new position.
func readBytes(body []byte, p int, bad framingError) ([]byte, bool, int, error) {
	l, n := kbin.Varint(body[p:])
	if n <= 0 {
		return nil, false, p, errRecVarint
	}
	p += n
	switch {
	case l == -1:
		return nil, true, p, nil
	case l < -1 || int(l) > len(body)-p:
		return nil, false, p, bad
	}
	return body[p : p+int(l) : p+int(l)], false, p + int(l), nil
}
