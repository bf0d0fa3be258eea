package tiering

// Flights: one GET per chunk and per index object, shared by every
// concurrent reader of it (singleflight), made under the read budget
// (budget.go); the chunk cache's file I/O (reading a cached chunk back,
// writing a fetched one).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"time"

	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/tiering/objstore"
)

// chunkFlight is one GET of one chunk, shared by everyone who wants the
// chunk meanwhile (singleflight). done closes once data or err is set.
type chunkFlight struct {
	done   chan struct{}
	data   []byte
	err    error
	ticket readTicket
	bg     bool // led by read-ahead
	// cached: data went into the chunk cache, which may recycle it once
	// it lets go: waiters then read the chunk from the cache (pinned),
	// never from data.
	cached bool
}

type idxFlight struct {
	done   chan struct{}
	data   []byte
	err    error
	ticket readTicket
	bg     bool // led by read-ahead
}

// retryJoined reports whether a caller that joined a flight, and whose
// own ctx is still live, should start afresh rather than take the
// flight's error as its own: the leader gave up (its ctx ended), or the
// leader was read-ahead refused by the full background queue, a refusal
// that says nothing about a fetch's own place in the foreground queue.
func retryJoined(err error, leaderBG bool) bool {
	return isCtxErr(err) || leaderBG && errors.Is(err, ErrReadQueueFull)
}

// maxIndexObject bounds the bytes read of one .index or .timeindex object
// (Kafka's segment.index.bytes is at most a few MiB; a larger object is
// corrupt, not something to hold in memory).
const maxIndexObject = 64 << 20

// readChunk copies bytes [in, in+len(dst)) of chunk c of object key into
// dst: from the cache file, else from the chunk's flight (joined, or led
// by this caller). A cache file that fails to read back is dropped and
// the chunk fetched again.
func (r *Reader) readChunk(ctx context.Context, key string, size, c int64, dst []byte, in int64, count bool, missed *bool) error {
	k := chunkKey{key, c}
	counted := !count
	for {
		if e, mem := r.cache.lookup(k); e != nil {
			var err error
			if mem != nil {
				if in+int64(len(dst)) > int64(len(mem)) {
					err = fmt.Errorf("chunk holds %d bytes, read wants [%d, %d)", len(mem), in, in+int64(len(dst)))
				} else {
					copy(dst, mem[in:])
				}
			} else {
				err = readFileAt(e.path, dst, in)
			}
			r.cache.unpin(e)
			if err == nil {
				if !counted {
					r.hits.Add(1)
					r.m.cacheHits.Inc()
				}
				return nil
			}
			r.log.Warn("tiering: remote cache file unreadable, refetching", "object", key, "chunk", c, "err", err)
			r.cache.drop(e)
		}
		if !counted {
			counted = true
			r.misses.Add(1)
			r.m.cacheMisses.Inc()
		}
		*missed = true
		data, again, err := r.awaitChunk(ctx, k, size)
		if err != nil {
			return err
		}
		if again {
			continue
		}
		if in+int64(len(dst)) > int64(len(data)) {
			return fmt.Errorf("%w: %s chunk %d holds %d bytes", ErrCorruptObject, key, c, len(data))
		}
		copy(dst, data[in:])
		return nil
	}
}

// awaitChunk joins chunk k's flight, or leads one, and waits for it: the
// chunk's bytes (read-only), or again when the chunk was cached meanwhile
// (look it up again).
func (r *Reader) awaitChunk(ctx context.Context, k chunkKey, size int64) (data []byte, again bool, err error) {
	for {
		r.fmu.Lock()
		f, joined := r.chunkFlights[k]
		if !joined && r.cache.contains(k) {
			// Its flight ended (and cached it) since our lookup: a
			// flight leaves the table only after its chunk is cached.
			r.fmu.Unlock()
			return nil, true, nil
		}
		if !joined {
			f = &chunkFlight{done: make(chan struct{})}
			r.chunkFlights[k] = f
		} else {
			r.budget.promote(&f.ticket) // a fetch waits for it now
		}
		r.fmu.Unlock()
		if !joined {
			_ = r.runChunkFlight(ctx, f, k, size, false)
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		if f.err != nil {
			if joined && ctx.Err() == nil && retryJoined(f.err, f.bg) {
				continue // its leader gave up, or was refused as read-ahead
			}
			return nil, false, f.err
		}
		if f.cached {
			return nil, true, nil // pin it in the cache
		}
		return f.data, false, nil
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// runChunkFlight leads flight f: it waits for the budget and GETs the
// chunk, caches it (readable at once from its buffer, see cache.go),
// leaves the flight table and publishes the bytes to the flight's
// waiters. A flight leaves the table only once its chunk is cached (or
// refused by the cache), so no second GET of the chunk starts meanwhile;
// a failed flight leaves it before it is published, so a retry starts
// afresh. The chunk's file is then written holding the GET's budget slot
// (writes are bounded like GETs): on the caller's goroutine for
// read-ahead, on a background one for a fetch, which has its bytes
// already and must not wait for the disk.
func (r *Reader) runChunkFlight(ctx context.Context, f *chunkFlight, k chunkKey, size int64, readAhead bool) error {
	data, release, err := r.fetchChunk(ctx, f, k, size, readAhead)
	if err != nil {
		r.fmu.Lock()
		delete(r.chunkFlights, k)
		r.fmu.Unlock()
		f.err = err
		close(f.done)
		return err
	}
	e := r.cache.reserve(k, data, readAhead)
	r.fmu.Lock()
	delete(r.chunkFlights, k)
	r.fmu.Unlock()
	f.data, f.cached = data, e != nil
	close(f.done)
	if e == nil {
		release()
		return nil
	}
	write := func() {
		defer release()
		if err := writeChunkFile(e.path, data); err != nil {
			r.log.Warn("tiering: remote cache write failed", "object", k.obj, "chunk", k.idx, "err", err)
			r.cache.drop(e)
		} else {
			r.cache.written(e)
		}
		r.cache.unpin(e)
	}
	if readAhead || !r.background(write) {
		write()
	}
	return nil
}

// fetchChunk GETs chunk k.idx of an object of size bytes under the
// budget. On success the caller holds the GET's slot until it calls
// release.
func (r *Reader) fetchChunk(ctx context.Context, f *chunkFlight, k chunkKey, size int64, readAhead bool) ([]byte, func(), error) {
	off := k.idx * r.chunkBytes
	n := min(r.chunkBytes, size-off)
	if n <= 0 {
		return nil, nil, fmt.Errorf("%w: %s: chunk %d past its %d bytes", ErrCorruptObject, k.obj, k.idx, size)
	}
	release, err := r.acquireBudget(ctx, &f.ticket, !readAhead, n)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	rc, err := r.store.Get(ctx, k.obj, off, n)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("tiering: reader: get %s [%d, +%d): %w", k.obj, off, n, err)
	}
	defer rc.Close()
	buf := r.chunkBuf(n)
	if _, err := io.ReadFull(rc, buf); err != nil {
		r.recycleBuf(buf)
		release()
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("%w: %s: chunk %d shorter than %d bytes", ErrCorruptObject, k.obj, k.idx, n)
		}
		return nil, nil, fmt.Errorf("tiering: reader: get %s [%d, +%d): %w", k.obj, off, n, err)
	}
	r.noteGetLatency(time.Since(start))
	r.m.getBytes.Add(float64(n))
	r.fetchedBytes.Add(n)
	return buf, release, nil
}

// chunkBuf returns a buffer of n bytes for a chunk's GET: a recycled one
// (chunkBytes of capacity; the cache gives them back, cache.go's recycle)
// for a chunk of more than half that (a segment's last chunk is short,
// and with segments no larger than a chunk every chunk is), else a new
// one.
func (r *Reader) chunkBuf(n int64) []byte {
	if n > r.chunkBytes/2 && n <= r.chunkBytes {
		if bp, ok := r.bufs.Get().(*[]byte); ok {
			return (*bp)[:n]
		}
		return make([]byte, n, r.chunkBytes) // recyclable
	}
	return make([]byte, n)
}

// recycleBuf takes back a chunk buffer nobody reads any more.
func (r *Reader) recycleBuf(b []byte) {
	if int64(cap(b)) == r.chunkBytes {
		b = b[:cap(b)]
		r.bufs.Put(&b)
	}
}

// acquireBudget takes a thread and n bytes of rate budget, records the
// wait and counts the GET the caller is about to make; the caller calls
// release once.
func (r *Reader) acquireBudget(ctx context.Context, t *readTicket, fg bool, n int64) (release func(), err error) {
	start := time.Now()
	if err := r.budget.acquire(ctx, t, fg); err != nil {
		return nil, err
	}
	if r.budget.bucket != nil && n > 0 {
		if err := r.budget.bucket.wait(ctx, n); err != nil {
			r.budget.release()
			return nil, err
		}
	}
	if n > 0 {
		if err := r.shareWait(ctx, n); err != nil {
			r.budget.release()
			return nil, err
		}
	}
	r.m.queueWait.Observe(time.Since(start).Seconds())
	r.gets.Add(1)
	r.m.gets.Inc()
	return sync.OnceFunc(r.budget.release), nil
}

// withBudget runs get holding a thread and n bytes of rate budget.
func (r *Reader) withBudget(ctx context.Context, t *readTicket, fg bool, n int64, get func() error) error {
	release, err := r.acquireBudget(ctx, t, fg, n)
	if err != nil {
		return err
	}
	defer release()
	return get()
}

// index returns the bytes of seg's index object ext (ExtIndex or
// ExtTimeIndex): from the index cache, else one shared GET. A missing or
// malformed index is no error: the log is the source of truth, and nil
// makes the scan start at the segment's first batch.
func (r *Reader) index(ctx context.Context, seg RemoteSegment, ext string, fg bool) ([]byte, error) {
	key := seg.Key(r.prefix, ext)
	if b, ok := r.idx.get(key); ok {
		if fg {
			r.idxHits.Add(1)
			r.m.indexHits.Inc()
		}
		return b, nil
	}
	if fg {
		r.idxMisses.Add(1)
		r.m.indexMisses.Inc()
	}
	for {
		r.fmu.Lock()
		f, joined := r.idxFlights[key]
		if !joined {
			f = &idxFlight{done: make(chan struct{}), bg: !fg}
			r.idxFlights[key] = f
		} else if fg {
			r.budget.promote(&f.ticket) // a fetch waits for it now
		}
		r.fmu.Unlock()
		if !joined {
			f.data, f.err = r.fetchIndex(ctx, &f.ticket, seg, key, ext, fg)
			if f.err == nil {
				r.idx.put(key, f.data)
			}
			r.fmu.Lock()
			delete(r.idxFlights, key)
			r.fmu.Unlock()
			close(f.done)
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil && joined && ctx.Err() == nil && retryJoined(f.err, f.bg) {
			continue
		}
		return f.data, f.err
	}
}

func (r *Reader) fetchIndex(ctx context.Context, t *readTicket, seg RemoteSegment, key, ext string, fg bool) ([]byte, error) {
	var data []byte
	err := r.withBudget(ctx, t, fg, 0, func() error {
		b, packed, err := r.fetchPacked(ctx, seg, ext)
		if err != nil {
			return err
		}
		if packed {
			data = b
			return nil
		}
		rc, err := r.store.Get(ctx, key, 0, -1)
		if errors.Is(err, objstore.ErrNotFound) {
			if ext == ExtTxnIndex {
				// Uploaded before transactions: no aborted transaction.
				data = []byte{}
				return nil
			}
			r.log.Warn("tiering: remote segment index missing, scanning from the segment start", "object", key)
			data = []byte{}
			return nil
		}
		if err != nil {
			return fmt.Errorf("tiering: reader: get %s: %w", key, err)
		}
		defer rc.Close()
		data, err = io.ReadAll(io.LimitReader(rc, maxIndexObject+1))
		if err != nil {
			return fmt.Errorf("tiering: reader: get %s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.m.getBytes.Add(float64(len(data)))
	if r.budget.bucket != nil {
		// Charged after the fact: the size is known only now.
		if err := r.budget.bucket.wait(ctx, int64(len(data))); err != nil {
			return nil, err
		}
	}
	entry := 8
	switch ext {
	case ExtTimeIndex:
		entry = 12
	case ExtTxnIndex:
		entry = txnIndexEntry
	}
	if len(data) > maxIndexObject || len(data)%entry != 0 {
		r.log.Warn("tiering: remote segment index malformed, scanning from the segment start", "object", key, "bytes", len(data))
		data = []byte{}
	}
	return data, nil
}

// fetchPacked reads section ext of seg's packed .meta object: the
// directory (one ranged GET of its head, kept in the index cache, an
// empty entry when the segment has no .meta: archived before packing),
// then the section (one ranged GET). packed is false for a segment
// without a .meta, whose separate objects the caller reads. A corrupt
// object or section is no error, as a malformed index is not: the
// section reads as empty and the scan starts at the segment's start.
func (r *Reader) fetchPacked(ctx context.Context, seg RemoteSegment, ext string) (data []byte, packed bool, err error) {
	mkey := seg.Key(r.prefix, ExtMeta)
	head, cached := r.idx.get(mkey)
	if !cached {
		head, err = getRange(ctx, r.store, mkey, 0, packHeadRead)
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			head = []byte{}
			r.idx.put(mkey, head)
		case err != nil:
			return nil, false, fmt.Errorf("tiering: reader: get %s: %w", mkey, err)
		}
	}
	if len(head) == 0 {
		return nil, false, nil
	}
	d, err := decodePackDir(head, 1<<62)
	if err != nil {
		// Not cached: a torn read is not the object.
		r.log.Warn("tiering: remote segment metadata object malformed, scanning from the segment start", "object", mkey, "err", err)
		return []byte{}, true, nil
	}
	if !cached {
		// Only the directory stays cached; a section the head holds
		// whole is served from it now.
		r.idx.put(mkey, head[:d.dirLen()])
		if sec, ok := d.find(ext); ok && sec.off+sec.length <= int64(len(head)) {
			b := head[sec.off : sec.off+sec.length]
			if crc32.Checksum(b, castagnoli) != sec.crc {
				r.log.Warn("tiering: remote segment metadata section malformed, scanning from the segment start", "object", mkey, "section", ext)
				return []byte{}, true, nil
			}
			return bytes.Clone(b), true, nil
		}
	}
	b, _, err := readPackSection(ctx, r.store, mkey, d, ext)
	switch {
	case errors.Is(err, ErrCorruptPack):
		r.log.Warn("tiering: remote segment metadata section malformed, scanning from the segment start", "object", mkey, "section", ext, "err", err)
		return []byte{}, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("tiering: reader: get %s: %w", mkey, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, true, nil
}

// readFileAt reads len(p) bytes of the file at path from off. Through vfs
// like the rest of the cache directory (cache.go).
func readFileAt(path string, p []byte, off int64) error {
	f, err := vfs.Default.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// writeChunkFile creates path (it must not exist) holding data. No fsync:
// the cache is wiped at start, so a torn file is never read.
func writeChunkFile(path string, data []byte) error {
	f, err := vfs.Default.CreateExclusive(path, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
