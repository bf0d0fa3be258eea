package tiering

// Read-ahead: a foreground read that moves forward into the next chunk of
// a segment (or starts at its first batch) is sequential, and the next
// chunks are fetched in the background, at background priority, going on
// into the segments that follow ([Reader.Follows], else ReaderConfig.Next)
// while the window reaches past a segment's end. How many: readAheadDepth
// (readahead_policy.go), from ReadAheadChunks up.

import "time"

// noteAccess updates the segment's read-ahead state after a foreground
// read: a read that moved forward from the last chunk into the next one,
// or that began at the segment's first batch, is sequential, and the
// depth chunks after the last one it touched are prefetched (those not
// already issued), going on into the following segment when
// [Reader.Follows] named it. The depth is decided by readAheadDepth each
// time the reader moves into a new chunk, from its rate, the store's GET
// latency, whether this read waited for a GET and the read-ahead the
// cache evicted unread; it goes on with the reader into the next segment.
func (lr *logReader) noteAccess() {
	r := lr.r
	if lr.lo > lr.hi {
		return
	}
	st := lr.st
	now := time.Now()
	wasted := r.cache.wasted()
	st.mu.Lock()
	last := st.lastChunk
	st.lastChunk = lr.hi
	sequential := last >= 0 && lr.hi > last && lr.lo <= last+1 && lr.lo >= last ||
		lr.fromStart && lr.lo == 0
	nchunks := (lr.size + r.chunkBytes - 1) / r.chunkBytes
	var from, to int64
	var next *RemoteSegment
	if lr.fromStart && lr.lo == 0 {
		// A reader (re)starting at the segment's beginning: what was
		// issued for an earlier pass says nothing of what is cached now.
		st.raUpTo = -1
	}
	depth := st.depth
	if sequential && r.readAhead > 0 {
		if depth == 0 {
			depth, st.wastedSeen = r.readAhead, wasted
		}
		if last >= 0 && lr.hi > last {
			if !st.lastAdv.IsZero() {
				if el := now.Sub(st.lastAdv).Seconds(); el > 0 {
					inst := float64(lr.hi-last) * float64(r.chunkBytes) / el
					st.rate = ewma(st.rate, inst)
				}
			}
			st.lastAdv = now
		} else if st.lastAdv.IsZero() {
			st.lastAdv = now
		}
		depth = readAheadDepth(raInput{
			Depth: depth, Stalled: lr.stalled && last >= 0, Wasted: wasted - st.wastedSeen,
			Rate: st.rate, GetLatency: time.Duration(r.getNanos.Load()), ChunkBytes: r.chunkBytes,
			Min: r.readAhead, Max: r.raMax,
		})
		st.depth, st.wastedSeen = depth, wasted
		from = max(lr.hi+1, st.raUpTo+1)
		to = lr.hi + int64(depth)
		st.raUpTo = max(st.raUpTo, to)
		next = st.next
	} else if !sequential {
		st.raUpTo = -1
	}
	rate, lastAdv := st.rate, st.lastAdv
	st.mu.Unlock()
	if !sequential {
		return
	}
	for c := from; c <= min(to, nchunks-1); c++ {
		r.prefetch(lr.key, lr.size, c)
	}
	if to >= nchunks && next != nil {
		r.readAheadPast(*next, from-nchunks, to-nchunks, raCarry{depth, rate, lastAdv, wasted})
	}
}

// raCarry is the read-ahead state a reader takes with it into the
// segments after its own.
type raCarry struct {
	depth   int
	rate    float64
	lastAdv time.Time
	wasted  int64
}

// readAheadPast goes on with a window that ran past the end of a segment:
// chunks [from, to] counted from the start of seg, the segment after it,
// and on into the segments after seg while the window reaches past their
// ends (small segments: a window of d chunks over one-chunk segments
// covers d segments, not one). The segment after each comes from
// [Reader.Follows], else from ReaderConfig.Next; where neither knows it,
// read-ahead stops there. Each segment entered gets the reader's window
// and rate. Its index is not fetched ahead: the reader enters it at its
// first batch and goes on from where each read ended, neither of which
// needs the index (Reader.seek), so a catch-up pays one GET per chunk and
// none per segment; a read that lands mid-segment fetches the index then.
func (r *Reader) readAheadPast(seg RemoteSegment, from, to int64, ra raCarry) {
	for to >= 0 {
		key := seg.Key(r.prefix, ExtLog)
		st := r.segState(key)
		st.mu.Lock()
		if st.depth == 0 {
			st.depth, st.rate, st.lastAdv, st.wastedSeen = ra.depth, ra.rate, ra.lastAdv, ra.wasted
		}
		next := st.next
		st.mu.Unlock()
		n := (seg.SizeBytes + r.chunkBytes - 1) / r.chunkBytes
		for c := max(from, 0); c <= min(to, n-1); c++ {
			r.prefetch(key, seg.SizeBytes, c)
		}
		from, to = from-n, to-n
		if to < 0 || n <= 0 {
			return
		}
		if next == nil {
			if r.nextSeg == nil {
				return
			}
			s, ok := r.nextSeg(seg)
			if !ok || s.SizeBytes <= 0 || s.BaseOffset <= seg.EndOffset {
				return
			}
			r.Follows(seg, s)
			next = &s
		}
		seg = *next
	}
}

// ewma folds a new sample into an average (weight 1/2: a reader's rate
// changes as fast as the consumer does); 0 is no average yet.
func ewma(avg, sample float64) float64 {
	if avg == 0 {
		return sample
	}
	return (avg + sample) / 2
}

// noteGetLatency folds one chunk GET's duration into the reader's
// average (weight 1/4; racing updates may lose a sample, which only
// slows the average).
func (r *Reader) noteGetLatency(d time.Duration) {
	old := r.getNanos.Load()
	v := int64(d)
	if old > 0 {
		v = old + (int64(d)-old)/4
	}
	r.getNanos.CompareAndSwap(old, v)
}

// background runs fn on a goroutine Close waits for; false (fn not run)
// once the reader is closed.
func (r *Reader) background(fn func()) bool {
	r.closeMu.RLock()
	defer r.closeMu.RUnlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fn()
	}()
	return true
}

// prefetch starts a background GET of chunk c unless it is cached, in
// flight, or the read-ahead budget is spent (then it is skipped, never
// queued without bound). The budget is node-wide: GETs in the air, and
// read-ahead chunks fetched or in the air but not read yet at most half
// the cache's chunks, whatever the number of readers: the windows of
// several readers of a small cache would otherwise evict each other's
// chunks before they are read, and every such chunk is fetched twice.
func (r *Reader) prefetch(key string, size, c int64) {
	k := chunkKey{key, c}
	if r.cache.contains(k) || r.raPending.Load() >= r.maxRA || !r.budget.bgRoom() ||
		int64(r.cache.raHeld())+r.raPending.Load() >= int64(r.raHold) {
		return
	}
	r.closeMu.RLock()
	defer r.closeMu.RUnlock()
	if r.closed {
		return
	}
	r.fmu.Lock()
	if r.chunkFlights[k] != nil || r.cache.contains(k) {
		// Checked again under fmu: a flight leaves the table only after
		// its chunk is cached, so no second GET starts for it.
		r.fmu.Unlock()
		return
	}
	f := &chunkFlight{done: make(chan struct{}), bg: true}
	r.chunkFlights[k] = f
	r.fmu.Unlock()
	r.raPending.Add(1)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.raPending.Add(-1)
		if r.runChunkFlight(r.ctx, f, k, size, true) == nil {
			r.raChunks.Add(1)
			r.m.readAhead.Inc()
		}
	}()
}
