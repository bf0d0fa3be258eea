package tiering

// Read-ahead: a foreground read that moves forward into the next chunk of
// a segment (or starts at its first batch) is sequential, and the next
// ReadAheadChunks chunks are fetched in the background, at background
// priority, going on into the segment named by [Reader.Follows].

// noteAccess updates the segment's read-ahead state after a foreground
// read: a read that moved forward from the last chunk into the next one,
// or that began at the segment's first batch, is sequential, and the
// ReadAheadChunks chunks after the last one it touched are prefetched
// (those not already issued), going on into the following segment when
// [Reader.Follows] named it.
func (lr *logReader) noteAccess() {
	r := lr.r
	if lr.lo > lr.hi {
		return
	}
	st := lr.st
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
	if sequential && r.readAhead > 0 {
		from = max(lr.hi+1, st.raUpTo+1)
		to = lr.hi + int64(r.readAhead)
		st.raUpTo = max(st.raUpTo, to)
		next = st.next
	} else if !sequential {
		st.raUpTo = -1
	}
	st.mu.Unlock()
	if !sequential {
		return
	}
	for c := from; c <= min(to, nchunks-1); c++ {
		r.prefetch(lr.key, lr.size, c)
	}
	if to >= nchunks && next != nil {
		// Past the end: the next segment's index, then its first chunks.
		r.prefetchIndex(*next)
		nkey := next.Key(r.prefix, ExtLog)
		nn := (next.SizeBytes + r.chunkBytes - 1) / r.chunkBytes
		for c := max(from-nchunks, 0); c <= min(to-nchunks, nn-1); c++ {
			r.prefetch(nkey, next.SizeBytes, c)
		}
	}
}

// prefetchIndex fetches seg's .index in the background, at read-ahead
// priority, unless it is cached or being fetched.
func (r *Reader) prefetchIndex(seg RemoteSegment) {
	key := seg.Key(r.prefix, ExtIndex)
	if r.idx.has(key) || r.raPending.Load() >= r.maxRA || !r.budget.bgRoom() {
		return
	}
	r.fmu.Lock()
	busy := r.idxFlights[key] != nil
	r.fmu.Unlock()
	if busy {
		return
	}
	r.background(func() {
		r.raPending.Add(1)
		defer r.raPending.Add(-1)
		_, _ = r.index(r.ctx, seg, ExtIndex, false)
	})
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
// queued without bound).
func (r *Reader) prefetch(key string, size, c int64) {
	k := chunkKey{key, c}
	if r.cache.contains(k) || r.raPending.Load() >= r.maxRA || !r.budget.bgRoom() {
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
