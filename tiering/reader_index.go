package tiering

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/strata-io/strata/internal/batch"
)

// Lookups in the bytes of a sealed segment's index objects, which are
// byte-identical copies of the local files (storage/index):
//
//	.index      8-byte entries: relative offset uint32 | position int32
//	.timeindex 12-byte entries: timestamp int64 | relative offset uint32
//
// big-endian, sorted, trimmed to the entries they hold. The .log is the
// truth: an index entry only says where a scan may start, so a damaged
// entry (past the object's end, out of order) is ignored and the scan
// starts earlier, never skipping a batch.

// offsetIndexLookup returns the position of the greatest entry whose
// offset is <= offset, or 0. Entries are binary searched; the position
// found must lie within the object and not below the entry before it.
func offsetIndexLookup(ix []byte, base, offset, size int64) int64 {
	n := len(ix) / 8
	if n == 0 || offset < base {
		return 0
	}
	t := min(offset-base, 1<<31-1)
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if int64(binary.BigEndian.Uint32(ix[mid*8:])) <= t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	i := lo - 1
	if i < 0 {
		return 0
	}
	pos := int64(int32(binary.BigEndian.Uint32(ix[i*8+4:])))
	if pos < 0 || pos >= size {
		return 0
	}
	if i > 0 {
		if prev := int64(int32(binary.BigEndian.Uint32(ix[(i-1)*8+4:]))); prev > pos {
			return 0
		}
	}
	return pos
}

// timeIndexLookup returns the offset of the greatest entry whose
// timestamp is <= ts, or base when every entry is later (storage's
// TimeIndex.Lookup).
func timeIndexLookup(ti []byte, base, ts int64) int64 {
	n := len(ti) / 12
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if int64(binary.BigEndian.Uint64(ti[mid*12:])) <= ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return base
	}
	return base + int64(binary.BigEndian.Uint32(ti[(lo-1)*12+8:]))
}

// headerWindow is how much a header scan reads at once: the index points
// within index.interval.bytes (4 KiB) of the target, so one window
// usually holds every header the scan needs.
const headerWindow = 64 << 10

// headerScanner reads batch headers of a .log, a window at a time.
// headerBufs holds headerWindow buffers for scans (a scan per fetch).
var headerBufs = sync.Pool{New: func() any { b := make([]byte, headerWindow); return &b }}

// free gives the scanner's buffer back; the scanner may be used again.
func (s *headerScanner) free() {
	if cap(s.buf) == headerWindow {
		b := s.buf[:headerWindow]
		headerBufs.Put(&b)
	}
	s.buf, s.at = nil, 0
}

type headerScanner struct {
	lr  *logReader
	buf []byte
	at  int64 // object position of buf[0]
}

// header returns the batch header at pos, checking that the batch lies
// within the object.
func (s *headerScanner) header(ctx context.Context, pos int64) (batch.Header, error) {
	lr := s.lr
	if lr.size-pos < batch.HeaderSize {
		return batch.Header{}, fmt.Errorf("%w: %s: %d bytes at %d, too short for a batch header", ErrCorruptObject, lr.key, lr.size-pos, pos)
	}
	if pos < s.at || pos+batch.HeaderSize > s.at+int64(len(s.buf)) {
		// Stay within pos's chunk unless the header itself crosses into
		// the next: never fetch a chunk the scan may not need.
		chunkEnd := (pos/lr.r.chunkBytes + 1) * lr.r.chunkBytes
		n := min(int64(headerWindow), lr.size-pos, max(chunkEnd-pos, batch.HeaderSize))
		if cap(s.buf) < int(n) {
			s.free()
			s.buf = (*headerBufs.Get().(*[]byte))[:0]
		}
		s.buf = s.buf[:n]
		if err := lr.readAt(ctx, s.buf, pos); err != nil {
			return batch.Header{}, err
		}
		s.at = pos
	}
	h, err := batch.ParseHeader(s.buf[pos-s.at:])
	if err != nil {
		return h, fmt.Errorf("%w: %s at %d: %v", ErrCorruptObject, lr.key, pos, err)
	}
	if pos+int64(h.Size()) > lr.size {
		return h, fmt.Errorf("%w: %s at %d: batch of %d bytes past the object's %d", ErrCorruptObject, lr.key, pos, h.Size(), lr.size)
	}
	return h, nil
}
