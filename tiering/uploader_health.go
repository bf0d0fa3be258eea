package tiering

import (
	"context"
	"sync"
	"time"
)

// The uploader's view of the object store's health. Each partition's
// retries back off exponentially (UploaderConfig.RetryBackoff up to
// RetryBackoffMax: remote.storage.retry.backoff.ms and .max.ms), which
// alone would leave a partition asleep for up to the cap after the store
// comes back. So the first failing retry of any partition starts one
// node-wide probe (a List of the probe prefix every probeEvery); while a
// probe has failed the store counts as down: one warning says so
// (instead of one per partition), and the moment a probe succeeds again
// every waiting retry wakes at once and one line logs the recovery with
// the backlog; another logs when that backlog has drained. A first probe
// that succeeds means the failures were not the store's (a controller
// error, a refused record): the retries keep their own backoff.

// probeEvery is the probe's period while the store fails.
const probeEvery = 500 * time.Millisecond

// storeHealth is the uploader's probe state.
type storeHealth struct {
	mu        sync.Mutex    // guards the fields below
	probing   bool          // a probe loop runs
	down      bool          // a probe failed and none succeeded since
	downSince time.Time     // when the first probe failed
	wake      chan struct{} // closed when a probe succeeds after one failed
	// draining is set at a recovery: the backlog then, until it is gone.
	draining              bool
	drainFrom             time.Time
	drainBytes, drainSegs int64
}

// suspect reports a failed store step: it starts the probe if none runs
// and returns the channel closed at the next recovery.
func (u *Uploader) suspect() <-chan struct{} {
	h := &u.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wake == nil {
		h.wake = make(chan struct{})
	}
	if !h.probing && !u.isClosing() {
		h.probing = true
		u.wg.Add(1)
		go u.probeLoop()
	}
	return h.wake
}

func (u *Uploader) isClosing() bool { return u.ctx.Err() != nil }

// storeDown reports whether the last probe failed.
func (u *Uploader) storeDown() bool {
	u.health.mu.Lock()
	defer u.health.mu.Unlock()
	return u.health.down
}

// probeLoop probes the store until it answers.
func (u *Uploader) probeLoop() {
	defer u.wg.Done()
	h := &u.health
	for {
		ctx, cancel := context.WithTimeout(u.ctx, max(probeEvery, 2*time.Second))
		_, err := u.cfg.Store.List(ctx, probePrefix)
		cancel()
		if u.ctx.Err() != nil {
			h.mu.Lock()
			h.probing = false
			h.mu.Unlock()
			return
		}
		if err == nil {
			// The backlog is read before the waiters wake (and without
			// h.mu: Statuses takes u.mu and the metadata's lock).
			lagBytes, lagSegs := u.backlog()
			h.mu.Lock()
			wasDown, since := h.down, h.downSince
			h.probing, h.down = false, false
			if wasDown {
				close(h.wake)
				h.wake = make(chan struct{})
				h.draining, h.drainFrom, h.drainBytes, h.drainSegs = true, time.Now(), lagBytes, int64(lagSegs)
			}
			h.mu.Unlock()
			if wasDown {
				u.log.Info("tiering: object store reachable again; uploads resume", "down_for", time.Since(since).Round(time.Millisecond),
					"backlog_segments", lagSegs, "backlog_bytes", lagBytes)
			}
			return
		}
		h.mu.Lock()
		first := !h.down
		if first {
			h.down, h.downSince = true, time.Now()
		}
		h.mu.Unlock()
		if first {
			u.log.Warn("tiering: object store unreachable; uploads and remote deletes wait for it (probing every "+probeEvery.String()+")", "err", err)
		}
		t := time.NewTimer(probeEvery)
		select {
		case <-u.ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// backlog sums the upload lag of every led partition.
func (u *Uploader) backlog() (bytes int64, segs int) {
	for _, s := range u.Statuses() {
		bytes += s.UploadLagBytes
		segs += s.UploadLagSegments
	}
	return bytes, segs
}

// checkDrained logs, once, that the backlog found at a recovery has been
// uploaded. The gauge loop calls it every Interval.
func (u *Uploader) checkDrained() {
	h := &u.health
	h.mu.Lock()
	draining, from, b, s := h.draining, h.drainFrom, h.drainBytes, h.drainSegs
	h.mu.Unlock()
	if !draining {
		return
	}
	if _, segs := u.backlog(); segs > 0 {
		return
	}
	h.mu.Lock()
	h.draining = false
	h.mu.Unlock()
	u.log.Info("tiering: upload backlog drained after the object store outage", "took", time.Since(from).Round(time.Millisecond),
		"segments", s, "bytes", b)
}
