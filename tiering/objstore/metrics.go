package objstore

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/promreg"
)

// Metric names exported by [WithMetrics] (dashboards use these):
//
//	strata_objstore_requests_total{backend,op,result}  counter
//	strata_objstore_bytes_total{backend,op}            counter: put, get bytes
//	strata_objstore_request_seconds{backend,op}        histogram
//
// result is one of ok, not_found, precondition_failed, invalid_range,
// canceled, error. Latency is the call's (for Get, until the body
// opens), not the body's transfer.
const (
	metricRequests = "strata_objstore_requests_total"
	metricBytes    = "strata_objstore_bytes_total"
	metricSeconds  = "strata_objstore_request_seconds"
)

var metricOps = [...]Op{OpPut, OpGet, OpHead, OpList, OpDelete}

const (
	resOK = iota
	resNotFound
	resPrecondition
	resInvalidRange
	resCanceled
	resError
	numResults
)

var resultNames = [numResults]string{"ok", "not_found", "precondition_failed", "invalid_range", "canceled", "error"}

// Metrics is the [ObjectStore] decorator [WithMetrics] returns.
type Metrics struct {
	next ObjectStore
	// Every child is resolved once here, so a call costs no label lookup
	// and no allocation (Get's counting reader aside).
	reqs    [len(metricOps)][numResults]prometheus.Counter
	bytes   [len(metricOps)]prometheus.Counter
	seconds [len(metricOps)]prometheus.Observer
}

// WithMetrics wraps store, registering its metrics on reg with the
// backend label (fs, s3, mem). Several stores may share reg: collectors
// already registered are reused. It returns an error only when reg holds
// an incompatible collector under the same name.
//
// Cost: Put, Head, List and Delete allocate nothing beyond the backend;
// Get allocates one small reader that counts the bytes really read.
func WithMetrics(store ObjectStore, reg prometheus.Registerer, backend string) (*Metrics, error) {
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricRequests, Help: "Object-store requests by operation and result.",
	}, []string{"backend", "op", "result"})
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricBytes, Help: "Object-store bytes written (put) and read (get).",
	}, []string{"backend", "op"})
	secs := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    metricSeconds,
		Help:    "Object-store request latency by operation (Get: until the body opens).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5ms .. ~16s
	}, []string{"backend", "op"})
	var err error
	if reqs, err = promreg.Register(reg, reqs); err != nil {
		return nil, err
	}
	if bytes, err = promreg.Register(reg, bytes); err != nil {
		return nil, err
	}
	if secs, err = promreg.Register(reg, secs); err != nil {
		return nil, err
	}
	m := &Metrics{next: store}
	for i, op := range metricOps {
		for r := range numResults {
			m.reqs[i][r] = reqs.WithLabelValues(backend, string(op), resultNames[r])
		}
		m.bytes[i] = bytes.WithLabelValues(backend, string(op))
		m.seconds[i] = secs.WithLabelValues(backend, string(op))
	}
	return m, nil
}

func classify(err error) int {
	switch {
	case err == nil:
		return resOK
	case errors.Is(err, ErrNotFound):
		return resNotFound
	case errors.Is(err, ErrPreconditionFailed):
		return resPrecondition
	case errors.Is(err, ErrInvalidRange):
		return resInvalidRange
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return resCanceled
	}
	return resError
}

// Index of each op in metricOps.
const (
	iPut = iota
	iGet
	iHead
	iList
	iDelete
)

func (m *Metrics) done(i int, start time.Time, err error) {
	m.seconds[i].Observe(time.Since(start).Seconds())
	m.reqs[i][classify(err)].Inc()
}

// Put implements [ObjectStore].
func (m *Metrics) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error) {
	start := time.Now()
	info, err := m.next.Put(ctx, key, r, size, opts)
	m.done(iPut, start, err)
	if err == nil {
		m.bytes[iPut].Add(float64(size))
	}
	return info, err
}

// Get implements [ObjectStore].
func (m *Metrics) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := m.next.Get(ctx, key, off, length)
	m.done(iGet, start, err)
	if err != nil {
		return nil, err
	}
	return &countingReader{rc: rc, c: m.bytes[iGet]}, nil
}

// countingReader adds the bytes read to a counter, once per Read.
type countingReader struct {
	rc io.ReadCloser
	c  prometheus.Counter
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if n > 0 {
		r.c.Add(float64(n))
	}
	return n, err
}

func (r *countingReader) Close() error { return r.rc.Close() }

// Head implements [ObjectStore].
func (m *Metrics) Head(ctx context.Context, key string) (ObjectInfo, error) {
	start := time.Now()
	info, err := m.next.Head(ctx, key)
	m.done(iHead, start, err)
	return info, err
}

// List implements [ObjectStore].
func (m *Metrics) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	start := time.Now()
	out, err := m.next.List(ctx, prefix)
	m.done(iList, start, err)
	return out, err
}

// Delete implements [ObjectStore].
func (m *Metrics) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := m.next.Delete(ctx, key)
	m.done(iDelete, start, err)
	return err
}
