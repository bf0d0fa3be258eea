package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"
)

// RetryPolicy bounds [WithRetry]. Zero fields take the defaults noted.
type RetryPolicy struct {
	MaxAttempts int           // attempts per call, the first included; default 5
	BaseDelay   time.Duration // delay before the second attempt; default 50ms
	MaxDelay    time.Duration // cap on one delay; default 5s
	// Retryable says whether err is transient. Default [Transient].
	Retryable func(error) bool
	// ResumeGets makes a Get body that fails midway with a transient error
	// re-open itself at the first byte not yet read (a ranged Get of the
	// rest) instead of returning the error, up to MaxAttempts opens per
	// body. Only for immutable objects (segment data, whose keys never
	// repeat): an object overwritten meanwhile would be spliced from two
	// versions. Off by default.
	ResumeGets bool
}

// Transient reports whether err may go away on retry: anything but the
// sentinels that describe the object or the request (not found, failed
// precondition, invalid range or key) and the caller's own context ending.
func Transient(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, ErrNotFound),
		errors.Is(err, ErrPreconditionFailed),
		errors.Is(err, ErrInvalidRange),
		errors.Is(err, ErrInvalidKey),
		errors.Is(err, errShortBody),
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return true
}

// Retry is the [ObjectStore] decorator [WithRetry] returns.
type Retry struct {
	next ObjectStore
	p    RetryPolicy
}

// WithRetry wraps store so each call is retried on transient errors with
// exponential backoff and equal jitter (a delay drawn from [d/2, d], d
// doubling from BaseDelay up to MaxDelay), every attempt and every sleep
// under the caller's context: the caller's deadline bounds the whole call.
//
// Put bodies: a Put can be retried only if its body can be re-read from
// the start. A body that is an [io.Seeker] (*bytes.Reader, *os.File,
// *io.SectionReader) is rewound to the position it had when Put was
// called before each retry; any other body gets exactly one attempt.
// Tiering uploads segment files and buffers, which are all seekable, so
// there is no hidden buffering here.
//
// A CreateOnly Put retried after a lost acknowledgement returns
// [ErrPreconditionFailed] for an object that is in fact the caller's: the
// caller resolves that (Head, compare size/ETag), as [ObjectStore] says.
//
// Get: opening the body is retried; an error while reading it is
// returned to the caller (who may issue a ranged Get from where it
// stopped) unless RetryPolicy.ResumeGets does that here.
func WithRetry(store ObjectStore, p RetryPolicy) *Retry {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 5
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 50 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 5 * time.Second
	}
	if p.Retryable == nil {
		p.Retryable = Transient
	}
	return &Retry{next: store, p: p}
}

// do runs fn until it succeeds, fails for good, runs out of attempts or
// ctx ends. attempt counts from 0.
func (r *Retry) do(ctx context.Context, fn func(attempt int) error) error {
	delay := r.p.BaseDelay
	for attempt := 0; ; attempt++ {
		err := fn(attempt)
		if err == nil || !r.p.Retryable(err) || attempt+1 >= r.p.MaxAttempts {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		d := delay/2 + rand.N(delay/2+1)
		if serr := sleepCtx(ctx, d); serr != nil {
			return fmt.Errorf("%w (retrying after: %w)", serr, err)
		}
		delay = min(delay*2, r.p.MaxDelay)
	}
}

// Put implements [ObjectStore]; see [WithRetry] for which bodies retry.
func (r *Retry) Put(ctx context.Context, key string, body io.Reader, size int64, opts PutOptions) (ObjectInfo, error) {
	seeker, ok := body.(io.Seeker)
	var start int64
	if ok {
		var err error
		if start, err = seeker.Seek(0, io.SeekCurrent); err != nil {
			ok = false
		}
	}
	if !ok {
		return r.next.Put(ctx, key, body, size, opts)
	}
	var info ObjectInfo
	err := r.do(ctx, func(attempt int) error {
		if attempt > 0 {
			if _, err := seeker.Seek(start, io.SeekStart); err != nil {
				return fmt.Errorf("objstore: rewinding body: %w", errors.Join(err, errShortBody))
			}
		}
		var err error
		info, err = r.next.Put(ctx, key, body, size, opts)
		return err
	})
	return info, err
}

// Get implements [ObjectStore].
func (r *Retry) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	rc, err := r.open(ctx, key, off, length)
	if err != nil || !r.p.ResumeGets {
		return rc, err
	}
	return &resumingReader{r: r, ctx: ctx, key: key, off: off, length: length, rc: rc, opens: 1}, nil
}

func (r *Retry) open(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := r.do(ctx, func(int) error {
		var err error
		rc, err = r.next.Get(ctx, key, off, length)
		return err
	})
	return rc, err
}

// resumingReader re-opens a torn body at off+read. off and length
// describe what is still to be read (length < 0: to the end).
type resumingReader struct {
	r      *Retry
	ctx    context.Context
	key    string
	off    int64
	length int64
	rc     io.ReadCloser
	opens  int
	pend   error // a read error that came with bytes, handled next Read
}

func (b *resumingReader) Read(p []byte) (int, error) {
	for {
		var n int
		err := b.pend
		if err != nil {
			b.pend = nil
		} else {
			n, err = b.rc.Read(p)
			b.off += int64(n)
			if b.length >= 0 {
				b.length -= int64(n)
			}
			if err == nil || err == io.EOF {
				return n, err
			}
			if n > 0 {
				// Hand over the bytes now and deal with the error on the
				// next Read (a torn body need not repeat its error).
				b.pend = err
				return n, nil
			}
		}
		if !b.r.p.Retryable(err) || b.opens >= b.r.p.MaxAttempts || b.length == 0 || b.ctx.Err() != nil {
			b.rc.Close()
			b.rc = errBody{err}
			return 0, err
		}
		b.rc.Close()
		b.opens++
		rc, oerr := b.r.open(b.ctx, b.key, b.off, b.length)
		if oerr != nil {
			b.rc = errBody{oerr}
			return 0, fmt.Errorf("%w (resuming after: %w)", oerr, err)
		}
		b.rc = rc
	}
}

func (b *resumingReader) Close() error { return b.rc.Close() }

// errBody is a closed body that keeps failing with err.
type errBody struct{ err error }

func (e errBody) Read([]byte) (int, error) { return 0, e.err }
func (e errBody) Close() error             { return nil }

// Head implements [ObjectStore].
func (r *Retry) Head(ctx context.Context, key string) (ObjectInfo, error) {
	var info ObjectInfo
	err := r.do(ctx, func(int) error {
		var err error
		info, err = r.next.Head(ctx, key)
		return err
	})
	return info, err
}

// List implements [ObjectStore].
func (r *Retry) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := r.do(ctx, func(int) error {
		var err error
		out, err = r.next.List(ctx, prefix)
		return err
	})
	return out, err
}

// Delete implements [ObjectStore].
func (r *Retry) Delete(ctx context.Context, key string) error {
	return r.do(ctx, func(int) error { return r.next.Delete(ctx, key) })
}
