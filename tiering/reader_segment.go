package tiering

// One remote segment's .log, read chunk by chunk through the chunk cache,
// and what the reader remembers of each segment between reads (its size,
// where its last reader was). See reader.go for the read as a whole.

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// segState is what the reader remembers of one segment's .log between
// reads: its size, and where its last reader was (read-ahead).
type segState struct {
	mu        sync.Mutex     // guards the fields below
	size      int64          // 0: unknown
	lastChunk int64          // last chunk a foreground read touched; -1: none
	raUpTo    int64          // highest chunk read-ahead was issued for; -1: none
	next      *RemoteSegment // the segment after this one ([Reader.Follows]); nil: unknown
	// okFrom, okTo: the .log's bytes whose batches views checked
	// (reader_view.go); okFrom >= okTo: none.
	okFrom, okTo int64
	// resumeOff, resumePos: the offset after the last batch a read
	// returned and its position in the .log, where the next read of a
	// sequential reader starts (reader.go's seek); resumeOff -1: none.
	resumeOff, resumePos int64
	// Read-ahead depth (reader_readahead.go): the window in chunks (0:
	// not decided yet), the reader's rate (bytes/s, EWMA), when it last
	// moved into a new chunk, and the cache's wasted read-ahead count
	// when the depth was last decided.
	depth      int
	rate       float64
	lastAdv    time.Time
	wastedSeen int64
}

// maxSegStates bounds the read-ahead state kept; beyond it an arbitrary
// segment's state is dropped (it only costs a missed read-ahead).
const maxSegStates = 8192

// logReader reads one segment's .log object through the chunk cache and
// remembers which chunks a foreground read touched (for read-ahead).
type logReader struct {
	r      *Reader
	key    string
	size   int64
	st     *segState
	lo, hi int64 // chunks touched; lo > hi: none
	// fromStart: the read began at the segment's first batch.
	fromStart bool
	// stalled: a chunk the read touched was not cached (it waited for a
	// GET, its own or read-ahead's).
	stalled bool
}

func (r *Reader) openLog(ctx context.Context, seg RemoteSegment) (*logReader, error) {
	key := seg.Key(r.prefix, ExtLog)
	st := r.segState(key)
	st.mu.Lock()
	size := st.size
	st.mu.Unlock()
	if size <= 0 {
		size = seg.SizeBytes
		if size <= 0 {
			info, err := r.store.Head(ctx, key)
			if err != nil {
				return nil, fmt.Errorf("tiering: reader: head %s: %w", key, err)
			}
			size = info.Size
		}
		st.mu.Lock()
		st.size = size
		st.mu.Unlock()
	}
	return &logReader{r: r, key: key, size: size, st: st, lo: 1, hi: 0}, nil
}

func (r *Reader) segState(key string) *segState {
	r.smu.Lock()
	defer r.smu.Unlock()
	st := r.segs[key]
	if st == nil {
		if len(r.segs) >= maxSegStates {
			for k := range r.segs {
				delete(r.segs, k)
				break
			}
		}
		st = &segState{lastChunk: -1, raUpTo: -1, resumeOff: -1}
		r.segs[key] = st
	}
	return st
}

// readAt fills p with the .log's bytes at off, chunk by chunk.
func (lr *logReader) readAt(ctx context.Context, p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > lr.size {
		return fmt.Errorf("%w: %s: read [%d, %d) past its %d bytes", ErrCorruptObject, lr.key, off, off+int64(len(p)), lr.size)
	}
	cb := lr.r.chunkBytes
	for len(p) > 0 {
		c := off / cb
		in := off - c*cb
		n := min(int64(len(p)), cb-in)
		// A logical read touches a contiguous run of chunks: count each
		// once in the hit/miss figures, however many headers it reads.
		counted := lr.lo <= c && c <= lr.hi
		if err := lr.r.readChunk(ctx, lr.key, lr.size, c, p[:n], in, !counted, &lr.stalled); err != nil {
			return err
		}
		if lr.lo > lr.hi {
			lr.lo, lr.hi = c, c
		} else {
			lr.lo, lr.hi = min(lr.lo, c), max(lr.hi, c)
		}
		p, off = p[n:], off+n
	}
	return nil
}

// resumeAt returns the position where the last read of the segment
// ended when offset is where it ended (ok false otherwise). Batches are
// contiguous in a .log, so the batch there is the one holding offset or
// the first after it (a gap left by compaction): seek walks on from it.
func (st *segState) resumeAt(offset int64) (pos int64, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.resumeOff < 0 || offset != st.resumeOff {
		return 0, false
	}
	return st.resumePos, true
}

// noteResume records where a read that returned batches up to offset
// (exclusive) ended: pos, the position after its last batch.
func (st *segState) noteResume(offset, pos int64) {
	if pos <= 0 {
		return
	}
	st.mu.Lock()
	st.resumeOff, st.resumePos = offset, pos
	st.mu.Unlock()
}
