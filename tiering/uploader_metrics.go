package tiering

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/promreg"
)

// uploaderMetrics are the uploader's Prometheus series (names in api.go).
// The gauges carry {topic} and are set from the led partitions' statuses
// after every pass; a topic's series are dropped when its last partition
// is resigned. Counters and the histogram are node-wide.
type uploaderMetrics struct {
	lagBytes, lagSegments, localBytes, remoteBytes, remoteSegments *prometheus.GaugeVec

	uploadedBytes, uploadedSegments, errors, remoteDeleted, orphans prometheus.Counter
	copySeconds                                                     prometheus.Observer
}

func newUploaderMetrics(reg prometheus.Registerer) (*uploaderMetrics, error) {
	gauge := func(name, help string) (*prometheus.GaugeVec, error) {
		return promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"topic"}))
	}
	counter := func(name, help string) (prometheus.Counter, error) {
		return promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
	}
	var m uploaderMetrics
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	m.lagBytes, err = gauge(MetricUploadLagBytes, "Bytes of sealed segments below the high watermark not yet uploaded.")
	add(err)
	m.lagSegments, err = gauge(MetricUploadLagSegments, "Sealed segments below the high watermark not yet uploaded.")
	add(err)
	m.localBytes, err = gauge(MetricLocalBytes, "Bytes of the local log of led tiered partitions.")
	add(err)
	m.remoteBytes, err = gauge(MetricRemoteBytes, "Bytes (.log objects) of COPY_FINISHED remote segments.")
	add(err)
	m.remoteSegments, err = gauge(MetricRemoteSegments, "COPY_FINISHED remote segments.")
	add(err)
	m.uploadedBytes, err = counter(MetricUploadedBytes, "Bytes of segment objects uploaded.")
	add(err)
	m.uploadedSegments, err = counter(MetricUploadedSegments, "Segments whose upload reached COPY_FINISHED.")
	add(err)
	m.errors, err = counter(MetricUploadErrors, "Failed attempts of upload, retention and cleanup steps.")
	add(err)
	m.remoteDeleted, err = counter(MetricRemoteDeletedSegs, "Remote segments deleted by remote retention or topic deletion.")
	add(err)
	m.orphans, err = counter(MetricOrphansDeleted, "Orphaned remote segments (COPY_STARTED never finished) deleted.")
	add(err)
	h, err := promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    MetricUploadSeconds,
		Help:    "Time to copy one segment, COPY_STARTED to COPY_FINISHED.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16), // 5ms .. ~160s
	}))
	add(err)
	m.copySeconds = h
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &m, nil
}

// dropTopic removes a topic's gauge series.
func (m *uploaderMetrics) dropTopic(topic string) {
	for _, g := range []*prometheus.GaugeVec{m.lagBytes, m.lagSegments, m.localBytes, m.remoteBytes, m.remoteSegments} {
		g.DeleteLabelValues(topic)
	}
}

// setTopic sets a topic's gauges to the sum of its led partitions'.
func (m *uploaderMetrics) setTopic(topic string, sts []PartitionStatus) {
	var lagB, lagS, local, remote, segs float64
	for _, s := range sts {
		lagB += float64(s.UploadLagBytes)
		lagS += float64(s.UploadLagSegments)
		local += float64(s.LocalBytes)
		remote += float64(s.RemoteBytes)
		segs += float64(s.RemoteSegments)
	}
	m.lagBytes.WithLabelValues(topic).Set(lagB)
	m.lagSegments.WithLabelValues(topic).Set(lagS)
	m.localBytes.WithLabelValues(topic).Set(local)
	m.remoteBytes.WithLabelValues(topic).Set(remote)
	m.remoteSegments.WithLabelValues(topic).Set(segs)
}
