// Package batch reads, checks and patches Kafka record batches in format v2
// (magic 2), the unit Strata receives from producers, stores byte for byte in
// segment files and serves to consumers.
//
// It owns the batch header layout ([ParseHeader], [Header]), CRC-32C
// ([Checksum]), the in-place patches a leader makes on append
// ([SetBaseOffset], [SetPartitionLeaderEpoch], [SetLogAppendTime]), cutting a
// record set into batches ([Split]), the produce-path validator ([Validate])
// and a record iterator ([Records]) that decompresses gzip, snappy, lz4 and
// zstd batches. It is a leaf: no I/O, no goroutines, nothing imported from
// storage, broker or net. It never re-encodes a batch or recompresses one on
// the produce path: the bytes a producer sent are the bytes that reach disk,
// apart from the header fields the patch functions name. The one exception is
// log compaction, which drops records: [Builder] writes the survivors as a
// new batch with the original header and codec, and [CheckStored] checks
// batches read back from a compacted log (offset-delta gaps, no records). Older formats (magic 0 and 1) are
// rejected, not converted. The wire codec for everything else is franz-go's
// kmsg.
//
// Every error wraps a sentinel of this package ([ErrCorrupt],
// [ErrInvalidRecord], ...), which in turn wraps the franz-go kerr error the
// broker should answer with:
//
//	h, err := batch.Validate(b, batch.Limits{MaxBatchBytes: 1 << 20, Now: nowMs,
//		TimestampBeforeMaxMs: -1, TimestampAfterMaxMs: 3600_000})
//	if err != nil {
//		var ke *kerr.Error
//		errors.As(err, &ke) // ke.Code is the partition's error code
//		return err
//	}
//	batch.SetBaseOffset(b, nextOffset)
//	nextOffset += int64(h.LastOffsetDelta) + 1
//
// All functions are safe for concurrent use on distinct buffers.
package batch
