// Package index implements the two sparse, memory-mapped indexes that sit
// beside every log segment: the offset index (.index: offset → file
// position) and the time index (.timeindex: timestamp → offset). Both are
// Kafka's on-disk formats, so a segment's files can be read by Kafka's own
// tools and uploaded to the remote tier as they are.
//
// index owns the index files only: their layout, preallocation, mapping,
// trimming, entry counting after a crash and sanity checks. It never reads
// the .log, never decides when an entry is due (the log appends one every
// index.interval.bytes) and never rebuilds an index: the log is the source
// of truth, and storage rebuilds an index that fails [OffsetIndex.SanityCheck]
// by rescanning its segment.
//
// Concurrency: each index has one writer (the partition's append path) and
// any number of readers (fetches). Lookups never wait for appends: an entry's
// bytes are written into the mapping first and the entry count is published
// atomically afterwards, so a reader sees either the old or the new count and
// only whole entries below it. Readers do wait, briefly, for the rare
// operations that change the mapping or rewrite published entries (Seal,
// Resize, TruncateTo, Reset, Close).
//
// Errors: Append returns [ErrIndexFull] (no free slot, or sealed: the log
// rolls; a time index keeps its last slot for [TimeIndex.AppendFinal], the
// max-timestamp entry a segment writes when it rolls, so that entry always
// fits) and [ErrInvalidEntry] (out of order; nothing written);
// SanityCheck wraps [ErrCorruptIndex] (the log rebuilds the index); every
// mutating method returns [ErrClosed] after Close. Lookups never fail: on a
// closed or broken index they answer the segment's start, which is always
// a safe place to scan from.
//
// Idempotent: Seal, Reset, Sync, Close, and TruncateTo or Resize repeated
// with the same argument. Append is not.
//
// Buffers: nothing is handed out; lookups return values.
//
// Usage:
//
//	ix, err := index.OpenOffsetIndex(vfs.Default, dir+"/00000000000000000000.index", 0, 10<<20)
//	...
//	// after writing a batch at file position pos, once index.interval.bytes have
//	// accumulated since the last entry:
//	err = ix.Append(batchBaseOffset, pos)
//	...
//	off, pos := ix.Lookup(target) // start scanning the .log at pos
//	...
//	err = ix.Seal() // on roll: trim the file to the entries it holds
package index
