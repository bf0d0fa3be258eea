package tiering

// Views: a remote read handed to the socket without copying its bytes.
//
// [Reader.ReadView] finds the batches a read returns exactly as
// [Reader.Read] does, but instead of copying them into a fresh slice it
// pins the chunks that hold them in the chunk cache and returns a
// [RemoteView] over them: a cached chunk whose file is written is a region
// of that (open) file, which the broker sendfile(2)s to the socket as it
// does a local segment's; a chunk whose file is still being written is its
// GET buffer, written to the socket as is. A pinned chunk is never
// evicted, and a forgotten one is unlinked only at its last unpin, so the
// bytes stay put until [RemoteView.Release].
//
// CRCs: every batch is checked once, when it first comes from the store
// (in memory, where checking costs no copy). Each segment remembers the
// contiguous byte range whose batches were checked; a view inside it is
// not checked again, so its cache files are trusted from then on as a
// local segment file is (a consumer checks CRCs itself). A cache file
// shorter than its chunk is dropped and the chunk fetched again, so a
// truncated file never reaches a socket. [Reader.Read] checks every time.

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/vfs"
)

// RemoteView is whole record batches of a remote segment (or of several
// consecutive ones, [ConcatViews]) held in the chunk cache without a
// copy. The caller must call Release once; the zero RemoteView is empty
// and Release on it is a no-op.
type RemoteView struct {
	FirstOffset int64 // base offset of the first batch (the offset read when empty)
	NextOffset  int64 // offset after the last batch
	Size        int64 // bytes
	sp          *span
}

// File returns the view's bytes as a read-only vfs.File (ReadAt over
// [0, Size)) that also lists its regions ([Regions]) for sendfile.
func (v RemoteView) File() vfs.File {
	if v.sp == nil {
		return &span{}
	}
	return v.sp
}

// Release unpins the view's chunks and closes its files.
func (v RemoteView) Release() {
	if v.sp != nil {
		v.sp.release()
	}
}

// Bytes copies the view's bytes into a new slice (tests, tools and
// [Reader.Read]).
func (v RemoteView) Bytes() ([]byte, error) {
	b := make([]byte, v.Size)
	if v.Size == 0 {
		return b, nil
	}
	if _, err := v.sp.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// retain takes one more reference (a fetch flight handing its view to
// one more fetch).
func (v RemoteView) retain() {
	if v.sp != nil {
		v.sp.refs.Add(1)
	}
}

// ConcatViews returns one view of a's bytes followed by b's (b must start
// at a.NextOffset), owning both: releasing it releases them.
func ConcatViews(a, b RemoteView) RemoteView {
	switch {
	case b.Size == 0:
		b.Release()
		return a
	case a.Size == 0:
		a.Release()
		return b
	}
	sp := &span{children: []*span{a.sp, b.sp}, size: a.Size + b.Size}
	sp.pieces = append(append(sp.pieces, a.sp.pieces...), b.sp.pieces...)
	sp.refs.Store(1)
	return RemoteView{FirstOffset: a.FirstOffset, NextOffset: b.NextOffset, Size: sp.size, sp: sp}
}

// piece is one chunk's share of a view: bytes [off, off+n) of the chunk,
// from its open file f, else from mem.
type piece struct {
	c      *chunkCache
	e      *chunkEntry // pinned; nil for a chunk the cache refused
	f      vfs.File    // the chunk's file, open; nil: mem
	mem    []byte      // the chunk's buffer when held (verification reads it)
	off, n int64
}

// span is a view's bytes: pieces in order, reference counted. A span made
// by ConcatViews owns its children and shares their pieces.
type span struct {
	pieces   []piece
	children []*span
	size     int64
	refs     atomic.Int32
}

func (s *span) release() {
	if s.refs.Add(-1) != 0 {
		return
	}
	if s.children != nil {
		for _, c := range s.children {
			c.release()
		}
		return
	}
	for _, p := range s.pieces {
		if p.f != nil {
			p.f.Close()
		}
		if p.e != nil {
			p.c.unpin(p.e)
		}
	}
}

// Regions calls fn for each region of [off, off+n) of the view in order:
// a file region (f, at, length) or a buffer (mem). It stops at fn's first
// error. The broker's frame writer uses it to sendfile the file regions.
func (s *span) Regions(off, n int64, fn func(f vfs.File, mem []byte, at, length int64) error) error {
	return s.each(off, n, func(p *piece, at, length int64) error {
		if p.f != nil {
			return fn(p.f, nil, at, length)
		}
		return fn(nil, p.mem[at:at+length], 0, length)
	})
}

// each calls fn for each piece's share [at, at+length) (chunk positions)
// of [off, off+n) of the view, in order.
func (s *span) each(off, n int64, fn func(p *piece, at, length int64) error) error {
	if off < 0 || off+n > s.size {
		return fmt.Errorf("tiering: view: regions [%d, %d) past its %d bytes", off, off+n, s.size)
	}
	for i := range s.pieces {
		p := &s.pieces[i]
		if n == 0 {
			break
		}
		if off >= p.n {
			off -= p.n
			continue
		}
		k := min(p.n-off, n)
		if err := fn(p, p.off+off, k); err != nil {
			return err
		}
		off, n = 0, n-k
	}
	return nil
}

// ReadAt copies the view's bytes at off into b.
func (s *span) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 || off > s.size {
		return 0, io.EOF
	}
	want := min(int64(len(b)), s.size-off)
	got := 0
	err := s.Regions(off, want, func(f vfs.File, mem []byte, at, length int64) error {
		dst := b[got : got+int(length)]
		if f == nil {
			copy(dst, mem)
		} else if k, err := f.ReadAt(dst, at); k < len(dst) {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		got += int(length)
		return nil
	})
	if err != nil {
		return got, err
	}
	if int64(len(b)) > want {
		return got, io.EOF
	}
	return got, nil
}

var errViewReadOnly = errors.New("tiering: remote view is read-only")

func (s *span) Read([]byte) (int, error)           { return 0, errViewReadOnly }
func (s *span) Write([]byte) (int, error)          { return 0, errViewReadOnly }
func (s *span) WriteAt([]byte, int64) (int, error) { return 0, errViewReadOnly }
func (s *span) Close() error                       { return nil }
func (s *span) Sync() error                        { return nil }
func (s *span) Truncate(int64) error               { return errViewReadOnly }
func (s *span) Stat() (iofs.FileInfo, error)       { return nil, errViewReadOnly }
func (s *span) Name() string                       { return "remote view" }
func (s *span) Mmap(int) ([]byte, error)           { return nil, errViewReadOnly }
func (s *span) Munmap([]byte) error                { return errViewReadOnly }

// ReadView is [Reader.Read] without the copy: the same batches (the same
// offsets, limits and errors), as a [RemoteView] over the chunk cache.
// With an error no view is returned (nothing to release).
func (r *Reader) ReadView(ctx context.Context, seg RemoteSegment, offset int64, maxBytes int) (RemoteView, error) {
	start := time.Now()
	if err := r.knownMissing(seg); err != nil {
		r.observe(start, err)
		return RemoteView{}, err
	}
	v, err := r.readView(ctx, seg, offset, maxBytes)
	err = r.noteRead(seg, err)
	r.observe(start, err)
	if err != nil {
		return RemoteView{}, err
	}
	r.m.readBytes.Add(float64(v.Size))
	return v, nil
}

func (r *Reader) readView(ctx context.Context, seg RemoteSegment, offset int64, maxBytes int) (RemoteView, error) {
	if err := r.checkRead(seg, offset); err != nil {
		return RemoteView{}, err
	}
	offset = max(offset, seg.BaseOffset)
	for attempt := 0; ; attempt++ {
		v, err := r.viewOnce(ctx, seg, offset, maxBytes)
		if err != nil && errors.Is(err, ErrCorruptObject) && attempt == 0 {
			r.forgetCached(seg)
			continue
		}
		return v, err
	}
}

func (r *Reader) viewOnce(ctx context.Context, seg RemoteSegment, offset int64, maxBytes int) (RemoteView, error) {
	lr, err := r.openLog(ctx, seg)
	if err != nil {
		return RemoteView{}, err
	}
	defer lr.noteAccess()
	pos, h, found, err := r.seek(ctx, lr, seg, offset)
	if err != nil || !found {
		return RemoteView{FirstOffset: offset, NextOffset: seg.EndOffset + 1}, err
	}
	want := min(max(int64(maxBytes), int64(h.Size())), lr.size-pos)
	sp, err := lr.pin(ctx, pos, want)
	if err != nil {
		return RemoteView{}, err
	}
	v := RemoteView{FirstOffset: h.BaseOffset, NextOffset: h.BaseOffset, sp: sp}
	okFrom, okTo := lr.st.checked()
	end, prevLast := int64(0), seg.BaseOffset-1
	var hb [batch.HeaderSize]byte
	fail := func(err error) (RemoteView, error) {
		sp.release()
		return RemoteView{}, err
	}
	for end < want {
		at := pos + end
		if want-end < batch.HeaderSize {
			if end == 0 {
				return fail(fmt.Errorf("%w: %s at %d: %d bytes, too short for a batch header", ErrCorruptObject, lr.key, at, want-end))
			}
			break // cut by maxBytes
		}
		if _, err := sp.ReadAt(hb[:], end); err != nil {
			return fail(fmt.Errorf("tiering: reader: %s at %d: %w", lr.key, at, err))
		}
		bh, err := batch.ParseHeader(hb[:])
		if err != nil {
			return fail(fmt.Errorf("%w: %s at %d: %v", ErrCorruptObject, lr.key, at, err))
		}
		size := int64(bh.Size())
		if size < batch.HeaderSize {
			return fail(fmt.Errorf("%w: %s at %d: batch length %d", ErrCorruptObject, lr.key, at, bh.Length))
		}
		if end+size > want {
			if end == 0 {
				return fail(fmt.Errorf("%w: %s at %d: batch of %d bytes past the object's %d", ErrCorruptObject, lr.key, at, size, lr.size))
			}
			break // the next batch is cut by maxBytes: not whole, not ours
		}
		if end > 0 && (end+size > int64(maxBytes) || bh.LastOffset() > seg.EndOffset) {
			break
		}
		if bh.BaseOffset <= prevLast || bh.LastOffset() < bh.BaseOffset {
			return fail(fmt.Errorf("%w: %s at %d: batch [%d, %d] after offset %d",
				ErrCorruptObject, lr.key, at, bh.BaseOffset, bh.LastOffset(), prevLast))
		}
		if !(okFrom <= at && at+size <= okTo) {
			sum, err := sp.checksum(end, size)
			if err != nil {
				return fail(fmt.Errorf("tiering: reader: %s at %d: %w", lr.key, at, err))
			}
			if sum != bh.CRC {
				return fail(fmt.Errorf("%w: %s at %d: crc32c %08x, batch says %08x", ErrCorruptObject, lr.key, at, sum, bh.CRC))
			}
		}
		prevLast = bh.LastOffset()
		v.NextOffset = prevLast + 1
		end += size
	}
	lr.st.noteChecked(pos, pos+end)
	lr.st.noteResume(v.NextOffset, pos+end)
	sp.trim(end)
	v.Size = end
	return v, nil
}

// checksum is batch.Checksum of the view's batch at [off, off+size):
// over the chunks' buffers where they are held (a chunk just fetched,
// the common case), else read from their files.
func (s *span) checksum(off, size int64) (uint32, error) {
	var sum uint32
	var bp *[]byte
	defer func() {
		if bp != nil {
			copyBufs.Put(bp)
		}
	}()
	skip := int64(21) // the CRC covers the batch from its attributes on
	err := s.each(off+skip, size-skip, func(p *piece, at, length int64) error {
		if p.mem != nil {
			sum = crc32.Update(sum, castagnoli, p.mem[at:at+length])
			return nil
		}
		if bp == nil {
			bp = copyBufs.Get().(*[]byte)
		}
		buf := *bp
		for length > 0 {
			n := min(length, int64(len(buf)))
			if k, err := p.f.ReadAt(buf[:n], at); int64(k) < n {
				if err == nil {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
			sum = crc32.Update(sum, castagnoli, buf[:n])
			at, length = at+n, length-n
		}
		return nil
	})
	return sum, err
}

// copyBufs are the buffers checksum reads cache files through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 128<<10); return &b }}

// trim drops the span's bytes from n on (the cut batch after the last
// whole one), unpinning chunks it no longer reaches.
func (s *span) trim(n int64) {
	keep := s.pieces[:0]
	left := n
	for _, p := range s.pieces {
		if left <= 0 {
			if p.f != nil {
				p.f.Close()
			}
			if p.e != nil {
				p.c.unpin(p.e)
			}
			continue
		}
		p.n = min(p.n, left)
		left -= p.n
		keep = append(keep, p)
	}
	s.pieces, s.size = keep, n
}

// pin returns a span over [off, off+n) of the .log, chunk by chunk: each
// chunk pinned in the cache (fetched first when missing).
func (lr *logReader) pin(ctx context.Context, off, n int64) (*span, error) {
	sp := &span{size: n}
	sp.refs.Store(1)
	cb := lr.r.chunkBytes
	for n > 0 {
		c := off / cb
		in := off - c*cb
		k := min(n, cb-in)
		counted := lr.lo <= c && c <= lr.hi
		p, err := lr.r.pinChunk(ctx, lr.key, lr.size, c, !counted, &lr.stalled)
		if err != nil {
			sp.size = 0
			sp.release()
			return nil, err
		}
		if in+k > p.n {
			sp.pieces = append(sp.pieces, p)
			sp.release()
			return nil, fmt.Errorf("%w: %s chunk %d holds %d bytes, read wants [%d, %d)", ErrCorruptObject, lr.key, c, p.n, in, in+k)
		}
		p.off, p.n = in, k
		sp.pieces = append(sp.pieces, p)
		if lr.lo > lr.hi {
			lr.lo, lr.hi = c, c
		} else {
			lr.lo, lr.hi = min(lr.lo, c), max(lr.hi, c)
		}
		off, n = off+k, n-k
	}
	return sp, nil
}

// pinChunk returns chunk c of object key whole as a piece (off 0, n its
// size): pinned in the cache, as its open file when written, else its
// buffer; fetched first (one flight shared as by readChunk) when missing;
// the flight's buffer, unpinned, when the cache refused the chunk. A
// cache file that is not the chunk's size is dropped and the chunk
// fetched again.
func (r *Reader) pinChunk(ctx context.Context, key string, size, c int64, count bool, missed *bool) (piece, error) {
	k := chunkKey{key, c}
	counted := !count
	for {
		if p, ok := r.pinCached(k); ok {
			if !counted {
				r.hits.Add(1)
				r.m.cacheHits.Inc()
			}
			return p, nil
		}
		if !counted {
			counted = true
			r.misses.Add(1)
			r.m.cacheMisses.Inc()
		}
		*missed = true
		data, again, err := r.awaitChunk(ctx, k, size)
		if err != nil {
			return piece{}, err
		}
		if again {
			continue
		}
		if p, ok := r.pinCached(k); ok {
			return p, nil // the flight cached it
		}
		return piece{mem: data, n: int64(len(data))}, nil
	}
}

// pinCached pins chunk k when the cache holds it readable: as its open
// file once written (else, or when the file cannot be opened, its
// buffer). A written chunk whose file is unreadable and whose buffer is
// gone is dropped (ok false: fetch it again).
func (r *Reader) pinCached(k chunkKey) (piece, bool) {
	e, mem, written := r.cache.lookupWritten(k)
	if e == nil {
		return piece{}, false
	}
	p := piece{c: r.cache, e: e, mem: mem, n: e.size}
	if !written {
		return p, true
	}
	f, err := openChunkFile(e.path, e.size)
	switch {
	case err == nil:
		p.f = f
		return p, true
	case mem != nil:
		return p, true
	}
	r.cache.unpin(e)
	r.log.Warn("tiering: remote cache file unreadable, refetching", "object", k.obj, "chunk", k.idx, "err", err)
	r.cache.drop(e)
	return piece{}, false
}

// openChunkFile opens a cache file and checks that it holds size bytes.
func openChunkFile(path string, size int64) (vfs.File, error) {
	f, err := vfs.Default.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && st.Size() != size {
		err = fmt.Errorf("cache file holds %d bytes, chunk %d", st.Size(), size)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checked returns the byte range of the segment whose batches were
// CRC-checked (from >= to: none).
func (st *segState) checked() (from, to int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.okFrom, st.okTo
}

// noteChecked adds [from, to), whole batches just checked, to the checked
// range: joined when they touch, else replacing it (a reader's position
// is where checking pays next).
func (st *segState) noteChecked(from, to int64) {
	if to <= from {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.okFrom < st.okTo && from <= st.okTo && to >= st.okFrom {
		st.okFrom, st.okTo = min(st.okFrom, from), max(st.okTo, to)
	} else {
		st.okFrom, st.okTo = from, to
	}
}
