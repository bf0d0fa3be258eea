package storage

import (
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/strata-io/strata/storage/vfs"
)

// The aborted-transaction index, <base>.txnindex, one per segment that
// holds an ABORT marker (Kafka's TransactionIndex). Each ABORT marker
// written to the segment appends one entry, in marker order, so entries
// ascend by LastOffset. All integers big endian:
//
//	offset  size  field
//	     0     2  version           int16  0
//	     2     8  producerId        int64  >= 0
//	    10     8  firstOffset       int64  the transaction's first offset (the marker's if none was open)
//	    18     8  lastOffset        int64  the ABORT marker's offset, >= firstOffset, inside the segment
//	    26     8  lastStableOffset  int64  the LSO right after the abort: the earliest other open
//	                                        transaction's first offset, or lastOffset + 1
//
// The file is created at the first entry (the directory fsynced then, so
// it outlives a crash as soon as its segment's data does), fsynced with
// its segment (flush, seal), renamed .deleted with it, cut by truncation
// (entries whose lastOffset is at or above the truncation point go) and
// rewritten by recovery from the log wherever it replays the transaction
// state (see Log.loadTxns): the index a recovery writes is byte for byte
// the one the live log wrote. Like the offset and time indexes it can be
// rebuilt from the log; unlike them it is also held in memory
// (segment.aborted), since read_committed fetches consult it on every read.
//
// Format migration: none yet; a new entry layout gets a new version and
// the reader keeps reading version 0.
const (
	txnEntrySize    = 34
	txnEntryVersion = 0
	// maxTxnIndexBytes bounds the read of one index: each entry stands
	// for a marker batch of at least 61 bytes in a segment of at most
	// 1 GiB (segment.bytes is an int).
	maxTxnIndexBytes = 1 << 30
)

// openOrCreate opens path read-write, creating it if missing.
func openOrCreate(fs vfs.FS, path string) (vfs.File, error) {
	f, err := fs.OpenReadWrite(path)
	if isNotExist(err) {
		f, err = fs.Create(path)
	}
	return f, err
}

// AbortedTxn is one entry of the aborted-transaction index: what a
// read_committed fetch returns as AbortedTransactions (ProducerID,
// FirstOffset) for the ranges it serves.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64 // the ABORT marker's offset
	LastStableOffset int64 // at the abort
}

// appendTxnEntry encodes a in the layout drawn above.
func appendTxnEntry(dst []byte, a AbortedTxn) []byte {
	be := binary.BigEndian
	dst = be.AppendUint16(dst, txnEntryVersion)
	dst = be.AppendUint64(dst, uint64(a.ProducerID))
	dst = be.AppendUint64(dst, uint64(a.FirstOffset))
	dst = be.AppendUint64(dst, uint64(a.LastOffset))
	return be.AppendUint64(dst, uint64(a.LastStableOffset))
}

// encodeTxnIndex encodes entries as a whole .txnindex file.
func encodeTxnIndex(entries []AbortedTxn) []byte {
	b := make([]byte, 0, len(entries)*txnEntrySize)
	for _, a := range entries {
		b = appendTxnEntry(b, a)
	}
	return b
}

// DecodeTxnIndex decodes a whole .txnindex file. It returns an error
// wrapping [ErrCorruption] for a length that is not a whole number of
// entries, an unknown version, a negative producer id, an entry whose
// offsets are out of order (firstOffset > lastOffset, a last stable offset
// above lastOffset + 1) or entries whose lastOffset does not ascend.
// Exported for cmd/logdump and the fuzz test.
func DecodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	out, err := decodeTxnIndexPrefix(b)
	if err == nil && len(out)*txnEntrySize != len(b) {
		err = fmt.Errorf("%w: transaction index of %d bytes is not a whole number of %d-byte entries", ErrCorruption, len(b), txnEntrySize)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// decodeTxnIndexPrefix decodes the valid entries at the start of b: it
// stops at a torn tail (no error) or at the first invalid entry (with
// the error).
func decodeTxnIndexPrefix(b []byte) ([]AbortedTxn, error) {
	be := binary.BigEndian
	out := make([]AbortedTxn, 0, len(b)/txnEntrySize)
	for p := 0; p+txnEntrySize <= len(b); p += txnEntrySize {
		if v := int16(be.Uint16(b[p:])); v != txnEntryVersion {
			return out, fmt.Errorf("%w: transaction index entry %d: unknown version %d", ErrCorruption, p/txnEntrySize, v)
		}
		a := AbortedTxn{
			ProducerID:       int64(be.Uint64(b[p+2:])),
			FirstOffset:      int64(be.Uint64(b[p+10:])),
			LastOffset:       int64(be.Uint64(b[p+18:])),
			LastStableOffset: int64(be.Uint64(b[p+26:])),
		}
		switch {
		case a.ProducerID < 0 || a.FirstOffset < 0 || a.FirstOffset > a.LastOffset ||
			a.LastStableOffset < 0 || a.LastStableOffset > a.LastOffset+1:
			return out, fmt.Errorf("%w: transaction index entry %d: %+v", ErrCorruption, p/txnEntrySize, a)
		case len(out) > 0 && a.LastOffset <= out[len(out)-1].LastOffset:
			return out, fmt.Errorf("%w: transaction index entry %d: last offset %d after %d", ErrCorruption, p/txnEntrySize, a.LastOffset, out[len(out)-1].LastOffset)
		}
		out = append(out, a)
	}
	return out, nil
}

func (s *segment) txnIndexPath() string {
	return filepath.Join(s.dir, SegmentFileName(s.base, TxnIndexFileSuffix))
}

// abortedTxns returns the segment's entries (immutable; nil when none).
func (s *segment) abortedTxns() []AbortedTxn {
	if p := s.aborted.Load(); p != nil {
		return *p
	}
	return nil
}

// appendAborted appends one entry to the segment's index, creating the
// file (and fsyncing the directory) at the first. Log.mu held.
func (s *segment) appendAborted(a AbortedTxn) error {
	old := s.abortedTxns()
	if s.txnf == nil {
		f, err := openOrCreate(s.fs, s.txnIndexPath())
		if err != nil {
			return fmt.Errorf("open %s: %w", s.txnIndexPath(), err)
		}
		s.txnf = f
		if len(old) == 0 {
			if err := s.fs.SyncDir(s.dir); err != nil {
				return fmt.Errorf("sync dir: %w", err)
			}
		}
	}
	rec := appendTxnEntry(make([]byte, 0, txnEntrySize), a)
	n, err := s.txnf.WriteAt(rec, int64(len(old))*txnEntrySize)
	if err == nil && n != len(rec) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("append to %s: %w", s.txnIndexPath(), err)
	}
	next := append(slices.Clip(old), a)
	s.aborted.Store(&next)
	return nil
}

// syncTxnIndex fsyncs the open index file, if any. Log.mu held.
func (s *segment) syncTxnIndex() error {
	if s.txnf == nil {
		return nil
	}
	return s.txnf.Sync()
}

// closeTxnIndex fsyncs and closes the open index file (a seal: a sealed
// segment's entries are read from memory; a truncation that reactivates
// it reopens the file).
func (s *segment) closeTxnIndex() error {
	if s.txnf == nil {
		return nil
	}
	err := s.txnf.Sync()
	if cerr := s.txnf.Close(); err == nil {
		err = cerr
	}
	s.txnf = nil
	return err
}

// loadTxnIndex reads the segment's index file into memory; a missing file
// is an empty index. Every segment's index but the last one's was fsynced
// (seal) and must decode whole. The last one's may have a torn or garbled
// unsynced tail after a crash: its valid prefix is kept (txnDirty set, so
// recovery rewrites the file), and Log.loadTxns keeps of it only entries
// its replay does not rebuild, each checked against the log.
func (s *segment) loadTxnIndex(last bool) error {
	s.aborted.Store(nil)
	s.txnDirty = false
	b, err := vfs.ReadFile(s.fs, s.txnIndexPath(), maxTxnIndexBytes)
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		return err
	}
	var entries []AbortedTxn
	if last {
		entries, _ = decodeTxnIndexPrefix(b)
		n := 0
		for n < len(entries) && entries[n].LastOffset >= s.base && entries[n].LastOffset < s.next.Load() {
			n++
		}
		entries = entries[:n]
		s.txnDirty = n*txnEntrySize != len(b)
	} else {
		if entries, err = DecodeTxnIndex(b); err != nil {
			return fmt.Errorf("segment %d: %w", s.base, err)
		}
		for _, a := range entries {
			if a.LastOffset < s.base || a.LastOffset >= s.next.Load() {
				return fmt.Errorf("%w: segment %d: transaction index entry at %d outside the segment", ErrCorruption, s.base, a.LastOffset)
			}
		}
	}
	if len(entries) > 0 {
		s.aborted.Store(&entries)
	}
	return nil
}

// abortMarkerAt reports whether the batch at offset off is a control
// batch of producer pid (what an index entry's LastOffset must point at).
func (s *segment) abortMarkerAt(off, pid int64) (bool, error) {
	limit := s.size.Load()
	_, p := s.oi.Lookup(off)
	pos := int64(p)
	hs := newHeaderScanner(s.log, limit)
	defer hs.release()
	for pos < limit {
		h, err := hs.header(pos)
		if err != nil {
			return false, err
		}
		if h.BaseOffset >= off || h.LastOffset() >= off {
			return h.BaseOffset == off && h.Control() && h.ProducerID == pid, nil
		}
		pos += int64(h.Size())
	}
	return false, nil
}

// setTxnIndex replaces the segment's index, in memory and on disk
// (recovery's rebuild), writing the file only if it differs; rewrote says
// whether it did.
func (s *segment) setTxnIndex(entries []AbortedTxn) (rewrote bool, err error) {
	if !s.txnDirty && slices.Equal(entries, s.abortedTxns()) {
		return false, nil
	}
	s.txnDirty = false
	if err := s.closeTxnIndex(); err != nil {
		return false, err
	}
	if len(entries) == 0 {
		if err := s.fs.Remove(s.txnIndexPath()); err != nil && !isNotExist(err) {
			return false, err
		}
		s.aborted.Store(nil)
		return true, nil
	}
	if err := vfs.WriteFileAtomic(s.fs, s.txnIndexPath(), encodeTxnIndex(entries)); err != nil {
		return false, err
	}
	cp := slices.Clone(entries)
	s.aborted.Store(&cp)
	return true, nil
}

// truncateTxnIndex drops the entries whose marker is at or above off.
// Log.mu held.
func (s *segment) truncateTxnIndex(off int64) error {
	old := s.abortedTxns()
	n := len(old)
	for n > 0 && old[n-1].LastOffset >= off {
		n--
	}
	if n == len(old) {
		return nil
	}
	if s.txnf == nil {
		f, err := openOrCreate(s.fs, s.txnIndexPath())
		if err != nil {
			return fmt.Errorf("open %s: %w", s.txnIndexPath(), err)
		}
		s.txnf = f
	}
	if err := s.txnf.Truncate(int64(n) * txnEntrySize); err != nil {
		return err
	}
	if err := s.txnf.Sync(); err != nil {
		return err
	}
	kept := slices.Clone(old[:n])
	s.aborted.Store(&kept)
	return nil
}

// AbortedTxns returns the aborted transactions whose range
// [FirstOffset, LastOffset] overlaps [from, to), oldest marker first: what
// a read_committed Fetch of [from, to) returns as AbortedTransactions.
// As Kafka's collectAbortedTransactions, it reads the segments from the
// one holding from on and stops after the first whose index has an entry
// with a last stable offset at or above to (no transaction open before to
// can end later). Lock-free; the slice is the caller's.
func (l *Log) AbortedTxns(from, to int64) []AbortedTxn {
	if to <= from {
		return nil
	}
	segs := l.segments()
	var out []AbortedTxn
	for i := max(findSegment(segs, from), 0); i < len(segs); i++ {
		complete := false
		for _, a := range segs[i].abortedTxns() {
			if a.LastOffset >= from && a.FirstOffset < to {
				out = append(out, a)
			}
			if a.LastStableOffset >= to {
				complete = true
			}
		}
		if complete {
			break
		}
	}
	return out
}

// abortMarkerAtPinned is abortMarkerAt with the segment's files pinned.
func (s *segment) abortMarkerAtPinned(off, pid int64) (bool, error) {
	if err := s.acquire(); err != nil {
		return false, err
	}
	defer s.release()
	return s.abortMarkerAt(off, pid)
}
