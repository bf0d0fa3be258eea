package tiering

// Fetch: a consumer fetch's remote read, coalesced and bounded in time.
//
// Remote reads never hold a fetch beyond remote.fetch.max.wait.ms: each is
// a "flight" on its own goroutine, shared by concurrent fetches of the
// same partition and offset, bounded node-wide by the reader's thread and
// bandwidth budget (budget.go). A fetch waits for its flight up to the
// wait and answers without the data of one still in the air; the flight
// goes on under its own deadline (FetchTimeout plus the wait), warms the
// chunk cache, and the consumer's next fetch finds the data there.

import (
	"context"
	"time"
)

// DefaultFetchTimeout bounds a fetch's flight when ReaderConfig leaves
// FetchTimeout 0 (the broker passes remote.storage.request.timeout.ms).
const DefaultFetchTimeout = 30 * time.Second

type fetchKey struct {
	p      Partition
	offset int64
}

// fetchFlight is one fetch read in progress; done is closed once res and
// err are set. The flight holds one reference on res until every fetch
// that waited for it has taken its own or given up (waiters, landed:
// guarded by Reader.fmu).
type fetchFlight struct {
	done    chan struct{}
	res     RemoteView
	err     error
	waiters int
	landed  bool
}

// Fetch starts the read of seg at offset (up to maxBytes, as
// [Reader.ReadView]) or joins the one in flight for the same partition
// and offset, and waits for it up to wait or until ctx ends. pending
// reports a read still in the air then: the caller answers without its
// data, and the read goes on to fill the cache. The view is the caller's
// to release (fetches that joined one flight share its chunks, each with
// its own reference). After [Reader.Close] it returns [ErrReaderClosed].
func (r *Reader) Fetch(ctx context.Context, seg RemoteSegment, offset int64, maxBytes int, wait time.Duration) (res RemoteView, pending bool, err error) {
	k := fetchKey{seg.Partition, offset}
	r.fmu.Lock()
	f := r.fetchFlights[k]
	lead := f == nil
	if lead {
		f = &fetchFlight{done: make(chan struct{})}
		r.fetchFlights[k] = f
		r.fetchReads.Add(1)
	}
	f.waiters++
	r.fmu.Unlock()
	// The flight starts outside fmu: background takes closeMu, which
	// comes before fmu (DESIGN.md's lock order).
	if lead && !r.background(func() {
		rctx, cancel := context.WithTimeout(r.ctx, r.fetchTimeout+wait)
		res, err := r.ReadView(rctx, seg, offset, maxBytes)
		cancel()
		r.land(k, f, res, err)
	}) {
		r.land(k, f, RemoteView{}, ErrReaderClosed)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	got := false
	select {
	case <-f.done:
		got = true
	case <-timer.C:
	case <-ctx.Done():
	}
	r.fmu.Lock()
	if got && f.err == nil {
		f.res.retain()
	}
	f.waiters--
	drop := f.waiters == 0 && f.landed
	r.fmu.Unlock()
	if drop {
		f.res.Release() // the flight's reference
	}
	if !got {
		return RemoteView{}, true, nil
	}
	return f.res, false, f.err
}

// land sets a fetch flight's outcome and takes it out of the table; its
// reference on the view goes at once when nobody waits for it any more.
func (r *Reader) land(k fetchKey, f *fetchFlight, res RemoteView, err error) {
	r.fmu.Lock()
	f.res, f.err = res, err
	f.landed = true
	delete(r.fetchFlights, k)
	drop := f.waiters == 0
	r.fmu.Unlock()
	close(f.done)
	if drop {
		res.Release()
	}
}
