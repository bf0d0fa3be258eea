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
// err are set.
type fetchFlight struct {
	done chan struct{}
	res  RemoteRead
	err  error
}

// Fetch starts the read of seg at offset (up to maxBytes, as [Reader.Read])
// or joins the one in flight for the same partition and offset, and waits
// for it up to wait or until ctx ends. pending reports a read still in the
// air then: the caller answers without its data, and the read goes on to
// fill the cache. The Records of res are shared by every fetch that joined
// the flight: read-only. After [Reader.Close] it returns [ErrReaderClosed].
func (r *Reader) Fetch(ctx context.Context, seg RemoteSegment, offset int64, maxBytes int, wait time.Duration) (res RemoteRead, pending bool, err error) {
	k := fetchKey{seg.Partition, offset}
	r.fmu.Lock()
	f := r.fetchFlights[k]
	lead := f == nil
	if lead {
		f = &fetchFlight{done: make(chan struct{})}
		r.fetchFlights[k] = f
		r.fetchReads.Add(1)
	}
	r.fmu.Unlock()
	// The flight starts outside fmu: background takes closeMu, which
	// comes before fmu (DESIGN.md's lock order).
	if lead && !r.background(func() {
		rctx, cancel := context.WithTimeout(r.ctx, r.fetchTimeout+wait)
		res, err := r.Read(rctx, seg, offset, maxBytes)
		cancel()
		r.land(k, f, res, err)
	}) {
		r.land(k, f, RemoteRead{}, ErrReaderClosed)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-f.done:
	case <-timer.C:
		return RemoteRead{}, true, nil
	case <-ctx.Done():
		return RemoteRead{}, true, nil
	}
	return f.res, false, f.err
}

// land sets a fetch flight's outcome and takes it out of the table.
func (r *Reader) land(k fetchKey, f *fetchFlight, res RemoteRead, err error) {
	f.res, f.err = res, err
	r.fmu.Lock()
	delete(r.fetchFlights, k)
	r.fmu.Unlock()
	close(f.done)
}
