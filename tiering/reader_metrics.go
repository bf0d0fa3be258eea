package tiering

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/promreg"
)

// readerMetrics are the remote reader's Prometheus metrics (names in
// api.go). Several readers may share a registry: collectors already
// registered are reused, and the cache-bytes gauge is moved by deltas so
// their figures add up.
type readerMetrics struct {
	readBytes      prometheus.Counter
	readsOK        prometheus.Counter
	readsError     prometheus.Counter
	readsTimeout   prometheus.Counter
	readSeconds    prometheus.Observer
	cacheHits      prometheus.Counter
	cacheMisses    prometheus.Counter
	cacheBytes     prometheus.Gauge
	cacheEvictions prometheus.Counter
	readAhead      prometheus.Counter
	queueWait      prometheus.Observer
	indexHits      prometheus.Counter
	indexMisses    prometheus.Counter
	gets, getBytes prometheus.Counter
	raWasted       prometheus.Counter
	// missingSegments counts remote segments a read found objects of
	// missing, once per segment.
	missingSegments prometheus.Counter
}

func newReaderMetrics(reg prometheus.Registerer) (*readerMetrics, error) {
	counter := func(name, help string) (prometheus.Counter, error) {
		return promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
	}
	var m readerMetrics
	var errs []error
	add := func(c prometheus.Counter, err error) prometheus.Counter {
		errs = append(errs, err)
		return c
	}
	m.readBytes = add(counter(MetricRemoteReadBytes, "Bytes of record batches the remote reader returned to fetches."))
	m.cacheHits = add(counter(MetricCacheHits, "Remote-read chunk lookups served from the local chunk cache."))
	m.cacheMisses = add(counter(MetricCacheMisses, "Remote-read chunk lookups that had to wait for the object store."))
	m.cacheEvictions = add(counter(MetricCacheEvictions, "Chunks evicted from the remote-read chunk cache."))
	m.readAhead = add(counter(MetricReadAheadChunks, "Chunks prefetched ahead of sequential remote readers."))
	m.indexHits = add(counter(MetricIndexCacheHits, "Remote segment index lookups served from memory."))
	m.indexMisses = add(counter(MetricIndexCacheMisses, "Remote segment index lookups fetched from the object store."))
	m.gets = add(counter(MetricRemoteGets, "Object-store GETs of the remote reader (chunks, indexes, read-ahead)."))
	m.getBytes = add(counter(MetricRemoteGetBytes, "Bytes the remote reader's GETs fetched from the object store."))
	m.raWasted = add(counter(MetricReadAheadWasted, "Read-ahead chunks evicted from the chunk cache before any fetch read them."))
	m.missingSegments = add(counter(MetricRemoteMissingSegments, "Remote segments a read found objects of missing from the bucket (once per segment)."))

	reads, err := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricRemoteReads, Help: "Remote reads (fetches and timestamp lookups) by result.",
	}, []string{"result"}))
	errs = append(errs, err)
	m.readsOK, m.readsError, m.readsTimeout = reads.WithLabelValues("ok"), reads.WithLabelValues("error"), reads.WithLabelValues("timeout")

	secs, err := promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: MetricRemoteReadSeconds, Help: "Latency of one remote read.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18), // 0.1ms .. ~13s
	}))
	errs = append(errs, err)
	m.readSeconds = secs
	wait, err := promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: MetricReadQueueWaitSeconds, Help: "Time an object-store GET of the remote reader waited for a thread and byte-rate budget.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}))
	errs = append(errs, err)
	m.queueWait = wait
	gauge, err := promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricCacheBytes, Help: "Bytes of chunk files in the remote-read cache, writes in progress included.",
	}))
	errs = append(errs, err)
	m.cacheBytes = gauge
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &m, nil
}
