package broker

import (
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/quota"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/buildinfo"
	"github.com/strata-io/strata/storage"
)

// The broker's Prometheus metrics. Every name is listed in the table in
// DESIGN.md ("Metrics"); dashboards read them from there. They are
// registered on the node's own Registry (never the global one), so several
// nodes in one process do not collide.
//
// Cost on the hot path: the request counters and latency histograms of
// every registered (API, version) are resolved once when the node starts,
// per-topic counters once per topic (cached on the partition), so
// recording a request or an append is a few atomic adds and never
// allocates (TestMetricsRequestPathDoesNotAllocate). Everything that can
// be read from state — connections, requests in flight, partitions, log
// sizes and offsets — is read at scrape time by [nodeCollector], costing
// nothing per request.
const metricsNamespace = "strata"

// latencyBuckets spans 100µs (a metadata answer on loopback) to 30s (the
// longest long poll or admin wait a client asks for), about 2.5x apart.
var latencyBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
}

// errNone is the error label of a request or partition without an error,
// as Kafka's RequestMetrics names it.
const errNone = "NONE"

// metrics are one node's broker metrics.
type metrics struct {
	requests        *prometheus.CounterVec   // api, version, error
	latency         *prometheus.HistogramVec // api
	connOpened      *prometheus.CounterVec   // listener
	connClosed      *prometheus.CounterVec   // listener
	partitionErrors *prometheus.CounterVec   // api, error
	bytesIn         *prometheus.CounterVec   // topic
	bytesOut        *prometheus.CounterVec   // topic
	messagesIn      *prometheus.CounterVec   // topic
	// SASL exchanges that succeeded and failed, by listener and
	// mechanism (36_sasl_authenticate.go).
	saslSuccess, saslFailure *prometheus.CounterVec

	// ISR changes this broker made as leader (Kafka's IsrShrinksPerSec,
	// IsrExpandsPerSec, FailedIsrUpdatesPerSec); the leader side counts
	// them through isrShrink, isrExpand and isrUpdateFailed.
	isrShrinks, isrExpands, isrUpdateFailures prometheus.Counter
	// quotaThrottled and quotaThrottleSeconds count client quota throttles
	// by quota type (produce, fetch, request): responses throttled and
	// their throttle time (Kafka's throttle-time sensors).
	quotaThrottled, quotaThrottleSeconds *prometheus.CounterVec
	// consumerFetchBytes are record bytes sent to consumers by this
	// broker as the partitions' leader and as a follower (KIP-392);
	// preferredReplica counts partitions a leader sent to another replica.
	consumerFetchBytes [2]prometheus.Counter // [0] leader, [1] follower
	preferredReplica   prometheus.Counter
	consumerFetchVec   *prometheus.CounterVec
	// adminRefused counts admin HTTP requests refused as unauthenticated
	// (401) or mutating without authentication off loopback (403).
	adminRefused prometheus.Counter

	// byKey holds the pre-resolved children of each registered API,
	// indexed by API key; read without a lock after newMetrics.
	byKey []*apiMetrics

	mu     sync.Mutex // guards topics
	topics map[string]*topicMetrics
}

// apiMetrics are the pre-resolved children of one API key.
type apiMetrics struct {
	name     string
	min      int16
	ok       []prometheus.Counter // requests_total{error="NONE"} by version-min
	latency  prometheus.Observer
	errField int // index of the response's top-level ErrorCode field; -1: none
}

// topicMetrics are one topic's counters, shared by its partitions. refs
// counts the hosted partitions holding it; at zero the topic's series are
// removed.
type topicMetrics struct {
	bytesIn, bytesOut, messagesIn prometheus.Counter
	refs                          int // guarded by metrics.mu
}

func newMetrics() *metrics {
	opts := func(sub, name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: sub, Name: name, Help: help}
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(opts("broker", "requests_total",
			"Requests answered, by API, version and the response's top-level error (NONE; per-partition errors are in partition_errors_total). A request that closed the connection carries the error that closed it."),
			[]string{"api", "version", "error"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: "broker",
			Name: "request_duration_seconds", Help: "Time from a request's frame being read to its response written (long polls included), by API.",
			Buckets: latencyBuckets}, []string{"api"}),
		connOpened: prometheus.NewCounterVec(opts("broker", "connections_opened_total", "Client connections accepted, by listener."), []string{"listener"}),
		connClosed: prometheus.NewCounterVec(opts("broker", "connections_closed_total", "Client connections closed (by either side), by listener."), []string{"listener"}),
		partitionErrors: prometheus.NewCounterVec(opts("broker", "partition_errors_total",
			"Per-partition error codes answered by Produce and Fetch, by API and error."), []string{"api", "error"}),
		bytesIn:    prometheus.NewCounterVec(opts("topic", "bytes_in_total", "Record-batch bytes appended by Produce, by topic."), []string{"topic"}),
		bytesOut:   prometheus.NewCounterVec(opts("topic", "bytes_out_total", "Record-batch bytes sent by Fetch, by topic."), []string{"topic"}),
		messagesIn: prometheus.NewCounterVec(opts("topic", "messages_in_total", "Records appended by Produce, by topic."), []string{"topic"}),
		topics:     map[string]*topicMetrics{},
		saslSuccess: prometheus.NewCounterVec(opts("sasl", "authentication_successes_total",
			"SASL authentications (and re-authentications) that succeeded, by listener and mechanism."), []string{"listener", "mechanism"}),
		saslFailure: prometheus.NewCounterVec(opts("sasl", "authentication_failures_total",
			"SASL authentications that failed (SASL_AUTHENTICATION_FAILED; the connection closed), by listener and mechanism."), []string{"listener", "mechanism"}),
		isrShrinks: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "broker", Name: "isr_shrinks_total",
			Help: "ISR shrinks of partitions this broker leads, committed by the controller (Kafka's IsrShrinksPerSec)."}),
		isrExpands: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "broker", Name: "isr_expands_total",
			Help: "ISR expansions of partitions this broker leads, committed by the controller (Kafka's IsrExpandsPerSec)."}),
		isrUpdateFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "broker", Name: "isr_update_failures_total",
			Help: "AlterPartition requests of this broker that the controller refused or that failed (Kafka's FailedIsrUpdatesPerSec)."}),
		adminRefused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "admin", Name: "refused_requests_total",
			Help: "Admin HTTP requests refused: unauthenticated (401), or changing the cluster without authentication configured off loopback (403)."}),
	}
	m.consumerFetchVec = prometheus.NewCounterVec(opts("broker", "consumer_fetch_bytes_total",
		"Record-batch bytes sent to consumers, by the role this broker held for the partition (leader, or follower: KIP-392 fetch from the closest replica)."), []string{"replica"})
	m.consumerFetchBytes[0] = m.consumerFetchVec.WithLabelValues("leader")
	m.consumerFetchBytes[1] = m.consumerFetchVec.WithLabelValues("follower")
	m.quotaThrottled = prometheus.NewCounterVec(opts("broker", "quota_throttled_responses_total",
		"Responses a client quota throttled (throttle_time_ms > 0, the connection muted), by quota type: produce, fetch, request."), []string{"type"})
	m.quotaThrottleSeconds = prometheus.NewCounterVec(opts("broker", "quota_throttle_seconds_total",
		"Throttle time client quotas imposed, by quota type: produce, fetch, request."), []string{"type"})
	m.preferredReplica = prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "broker", Name: "preferred_read_replica_total",
		Help: "Fetch partitions this broker, leading them, answered with another replica to read from (KIP-392 PreferredReadReplica)."})
	for _, a := range supportedAPIs() {
		if int(a.key) >= len(m.byKey) {
			m.byKey = append(m.byKey, make([]*apiMetrics, int(a.key)+1-len(m.byKey))...)
		}
		name := kmsg.NameForKey(a.key)
		am := &apiMetrics{name: name, min: a.min, latency: m.latency.WithLabelValues(name), errField: responseErrorField(a.key)}
		for v := a.min; v <= a.max; v++ {
			am.ok = append(am.ok, m.requests.WithLabelValues(name, strconv.Itoa(int(v)), errNone))
		}
		m.byKey[a.key] = am
	}
	return m
}

// register exports the metrics, the Go and process collectors and c on
// reg. The Go and process collectors may already be there (a registry the
// caller shares): that is not an error.
func (m *metrics) register(reg prometheus.Registerer, c prometheus.Collector) error {
	for _, col := range []prometheus.Collector{m.requests, m.latency, m.connOpened, m.connClosed,
		m.partitionErrors, m.bytesIn, m.bytesOut, m.messagesIn, m.isrShrinks, m.isrExpands, m.isrUpdateFailures,
		m.consumerFetchVec, m.preferredReplica, m.saslSuccess, m.saslFailure, buildInfoGauge(), c} {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	// Client quotas (quotas.go).
	for _, col := range []prometheus.Collector{m.quotaThrottled, m.quotaThrottleSeconds} {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	for _, col := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(col); err != nil {
			if _, dup := err.(prometheus.AlreadyRegisteredError); !dup {
				return err
			}
		}
	}
	return nil
}

// buildInfoGauge is strata_build_info{version,commit,goversion} 1: which
// Strata the node runs (internal/buildinfo), as Prometheus exporters spell
// it.
func buildInfoGauge() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "build_info",
		Help:        "Always 1; its labels say which Strata this node runs: release version, commit and Go version.",
		ConstLabels: prometheus.Labels{"version": buildinfo.Version(), "commit": buildinfo.Commit(), "goversion": buildinfo.GoVersion()}})
	g.Set(1)
	return g
}

// errorName is the label of a Kafka error code.
func errorName(code int16) string {
	if code == 0 {
		return errNone
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e.Code == code {
		return e.Message
	}
	return strconv.Itoa(int(code))
}

// quotaThrottle counts one throttled response of a quota type.
func (m *metrics) quotaThrottle(kind quota.Kind, d time.Duration) {
	m.quotaThrottled.WithLabelValues(kind.String()).Inc()
	m.quotaThrottleSeconds.WithLabelValues(kind.String()).Add(d.Seconds())
}

// observeRequest records one finished request: its top-level error code
// (0 when answered without one; a connection-closing handler error gives
// errCode(err)) and its latency since start.
func (m *metrics) observeRequest(key, version, code int16, start time.Time) {
	if m == nil || int(key) >= len(m.byKey) || m.byKey[key] == nil {
		return
	}
	am := m.byKey[key]
	am.latency.Observe(time.Since(start).Seconds())
	i := int(version) - int(am.min)
	if code == 0 && i >= 0 && i < len(am.ok) {
		am.ok[i].Inc()
		return
	}
	// Errors, and the ApiVersions v0 fallback for unknown versions: rare,
	// resolved here. A version the broker does not serve is labelled
	// "unsupported", so a client cannot mint 65536 series.
	v := "unsupported"
	if i >= 0 && i < len(am.ok) {
		v = strconv.Itoa(int(version))
	}
	m.requests.WithLabelValues(am.name, v, errorName(code)).Inc()
}

// partitionError counts a per-partition error code answered by api.
func (m *metrics) partitionError(api string, code int16) {
	if m == nil || code == 0 {
		return
	}
	m.partitionErrors.WithLabelValues(api, errorName(code)).Inc()
}

// consumerFetch counts bytes sent to a consumer as leader or follower.
// Nil-safe.
func (m *metrics) consumerFetch(asFollower bool, n int64) {
	if m == nil || n == 0 {
		return
	}
	i := 0
	if asFollower {
		i = 1
	}
	m.consumerFetchBytes[i].Add(float64(n))
}

// preferredRead counts one partition sent to another replica. Nil-safe.
func (m *metrics) preferredRead() {
	if m != nil {
		m.preferredReplica.Inc()
	}
}

// isrShrink counts one committed ISR shrink of a partition this broker
// leads. Nil-safe.
func (m *metrics) isrShrink() {
	if m != nil {
		m.isrShrinks.Inc()
	}
}

// isrExpand counts one committed ISR expansion of a partition this broker
// leads. Nil-safe.
func (m *metrics) isrExpand() {
	if m != nil {
		m.isrExpands.Inc()
	}
}

// isrUpdateFailed counts one AlterPartition that did not change the ISR
// (refused by the controller, or not answered). Nil-safe.
func (m *metrics) isrUpdateFailed() {
	if m != nil {
		m.isrUpdateFailures.Inc()
	}
}

// topic returns topic's counters, resolving them on first use; each call
// takes a reference that releaseTopic returns.
func (m *metrics) topic(topic string) *topicMetrics {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tm := m.topics[topic]
	if tm == nil {
		tm = &topicMetrics{
			bytesIn:    m.bytesIn.WithLabelValues(topic),
			bytesOut:   m.bytesOut.WithLabelValues(topic),
			messagesIn: m.messagesIn.WithLabelValues(topic),
		}
		m.topics[topic] = tm
	}
	tm.refs++
	return tm
}

// releaseTopic returns a reference taken by topic; the last one removes
// the topic's series (the topic was deleted or moved away), so a deleted
// topic does not stay in every scrape.
func (m *metrics) releaseTopic(topic string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tm := m.topics[topic]
	if tm == nil {
		return
	}
	if tm.refs--; tm.refs > 0 {
		return
	}
	delete(m.topics, topic)
	m.bytesIn.DeleteLabelValues(topic)
	m.bytesOut.DeleteLabelValues(topic)
	m.messagesIn.DeleteLabelValues(topic)
}

// appended counts a successful append. Nil-safe.
func (tm *topicMetrics) appended(info storage.AppendInfo) {
	if tm == nil {
		return
	}
	tm.bytesIn.Add(float64(info.Bytes))
	tm.messagesIn.Add(float64(info.LastOffset - info.FirstOffset + 1))
}

// sent counts record bytes handed to a fetch response. Nil-safe.
func (tm *topicMetrics) sent(bytes int64) {
	if tm == nil {
		return
	}
	tm.bytesOut.Add(float64(bytes))
}

// responseErrorField returns the index of the top-level ErrorCode field of
// key's kmsg response struct, or -1 if it has none (Produce, Fetch before
// v7 reads 0 there, Metadata, ...). Resolved once per API at start, so
// reading the code per response is one reflect field load.
func responseErrorField(key int16) int {
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		return -1
	}
	t := reflect.TypeOf(resp)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return -1
	}
	f, ok := t.Elem().FieldByName("ErrorCode")
	if !ok || f.Type.Kind() != reflect.Int16 || len(f.Index) != 1 {
		return -1
	}
	return f.Index[0]
}

// responseErrorCode reads resp's top-level ErrorCode (0 if it has none).
func (m *metrics) responseErrorCode(key int16, resp kmsg.Response) int16 {
	if m == nil || int(key) >= len(m.byKey) || m.byKey[key] == nil || m.byKey[key].errField < 0 {
		return 0
	}
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0
	}
	return int16(v.Elem().Field(m.byKey[key].errField).Int())
}

// nodeCollector reads at scrape time what the node already knows:
// connections and requests in flight, hosted and led partitions, and per
// partition the log's size, segments and offsets (from storage.Log's
// lock-free accessors), plus what storage recovery reported at start. A
// scrape walks the partitions once; appends pay nothing.
type nodeCollector struct {
	n *Node

	info, connections, inFlight, partitions, partitionsLed, ready, metadataOffset            *prometheus.Desc
	logSize, logSegments, logEnd, logStart, localLogStart, hw, recoveryPoint, leaderEpoch    *prometheus.Desc
	recTruncated, recDroppedSegs, recLogsRecovered, recLogs, recSeconds                      *prometheus.Desc
	cleanerRuns, cleanerFailures, cleanerRead, cleanerWritten, cleanerDirty, cleanerMaxDirty *prometheus.Desc
	rolls, rollSeconds, flushes, flushSeconds                                                *prometheus.Desc
	dirFree, dirMinFree, dirFull, dirOffline                                                 *prometheus.Desc
	reqMemUsed, reqMemWaiting                                                                *prometheus.Desc
	underReplicated, underMinISR, atMinISR, isrSize, replicas, offlinePartitions             *prometheus.Desc
	reassigning                                                                              *prometheus.Desc
}

func newNodeCollector(n *Node) *nodeCollector {
	d := func(sub, name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, sub, name), help, labels, nil)
	}
	tp := []string{"topic", "partition"}
	return &nodeCollector{
		n:                 n,
		info:              d("broker", "info", "Always 1; labels name the node and its cluster.", "node_id", "cluster_id"),
		connections:       d("broker", "connections", "Open client connections, by listener.", "listener"),
		inFlight:          d("broker", "requests_in_flight", "Requests read and not yet answered, over all connections."),
		partitions:        d("broker", "partitions", "Partitions hosted by this broker."),
		partitionsLed:     d("broker", "partitions_led", "Partitions this broker leads."),
		ready:             d("broker", "ready", "1 when /readyz answers 200: storage loaded, registered, unfenced, metadata caught up, controller reachable."),
		metadataOffset:    d("broker", "metadata_offset", "Metadata log offset whose partitions this broker has reconciled."),
		logSize:           d("log", "size_bytes", "Bytes of the partition's local segments.", tp...),
		logSegments:       d("log", "segments", "Local segments of the partition.", tp...),
		logEnd:            d("log", "end_offset", "Log end offset: the offset the next record gets.", tp...),
		logStart:          d("log", "start_offset", "Log start offset (DeleteRecords and retention move it).", tp...),
		localLogStart:     d("log", "local_start_offset", "First offset held in local segments.", tp...),
		hw:                d("log", "high_watermark", "High watermark: consumers read below it.", tp...),
		recoveryPoint:     d("log", "recovery_point_offset", "Offset below which the log is fsynced (end_offset - this = unflushed records).", tp...),
		leaderEpoch:       d("partition", "leader_epoch", "Leader epoch of a partition this broker hosts; -1 when it does not lead it.", tp...),
		recTruncated:      d("storage", "recovery_truncated_bytes", "Bytes cut from torn or corrupt log tails when storage loaded at start."),
		recDroppedSegs:    d("storage", "recovery_dropped_segments", "Whole segments dropped after a torn tail at start."),
		recLogsRecovered:  d("storage", "recovery_logs_rescanned", "Logs that took the slow recovery path (no clean shutdown) at start."),
		recLogs:           d("storage", "recovery_logs_loaded", "Logs loaded from the data directory at start."),
		recSeconds:        d("storage", "load_duration_seconds", "Wall time storage took to load and recover the data directory at start."),
		cleanerRuns:       d("log_cleaner", "runs_total", "Log cleanings that rewrote segments (storage.Manager.CleanerStats)."),
		cleanerFailures:   d("log_cleaner", "failures_total", "Log cleanings that failed."),
		cleanerRead:       d("log_cleaner", "read_bytes_total", "Bytes the log cleaner read (rate() = cleaner read bytes per second)."),
		cleanerWritten:    d("log_cleaner", "written_bytes_total", "Bytes the log cleaner wrote."),
		cleanerDirty:      d("log_cleaner", "dirty_ratio", "Dirty bytes / cleanable bytes of a compacted partition, as last computed.", tp...),
		cleanerMaxDirty:   d("log_cleaner", "max_dirty_ratio", "Highest dirty ratio over the compacted partitions (Kafka's max-clean-dirty-ratio)."),
		rolls:             d("log", "segment_rolls_total", "Segments sealed (rolled) since the partition's log opened.", tp...),
		rollSeconds:       d("log", "segment_roll_seconds_total", "Time rolls held the partition's append lock (their fsyncs run after it, in the background; rate of this / rate of segment_rolls_total = mean roll time).", tp...),
		flushes:           d("log", "flushes_total", "fsyncs of the active segment (flush.messages, flush.ms, shutdown) since the log opened.", tp...),
		flushSeconds:      d("log", "flush_seconds_total", "Time those fsyncs took (rate of this / rate of flushes_total = mean fsync time).", tp...),
		dirFree:           d("log_dir", "free_bytes", "Free space of the file system holding the log dir, as last measured (every second).", "dir"),
		dirMinFree:        d("log_dir", "min_free_bytes", "strata.log.dir.min.free.bytes: below this much free space the log dir refuses appends.", "dir"),
		dirFull:           d("log_dir", "full", "1 while the log dir refuses appends: free space below strata.log.dir.min.free.bytes, or a write failed with ENOSPC.", "dir"),
		dirOffline:        d("log_dir", "offline", "1 once an I/O error took the log dir, and its partitions, offline (until a restart).", "dir"),
		reqMemUsed:        d("broker", "request_memory_used_bytes", "Bytes of requests being read or handled, all client listeners together (bound: queued.max.request.bytes; Kafka's MemoryPoolUsed)."),
		reqMemWaiting:     d("broker", "request_memory_waiting_readers", "Connections waiting, without reading, for queued.max.request.bytes to have room for their next request."),
		underReplicated:   d("broker", "under_replicated_partitions", "Partitions this broker leads whose ISR is smaller than their replica set (Kafka's UnderReplicatedPartitions)."),
		reassigning:       d("broker", "reassigning_partitions", "Partitions this broker leads with a reassignment in progress (Kafka's ReassigningPartitions)."),
		underMinISR:       d("broker", "under_min_isr_partitions", "Partitions this broker leads whose ISR is below min(min.insync.replicas, replication factor): acks=all produce is refused and the HW stands still (Kafka's UnderMinIsrPartitionCount)."),
		atMinISR:          d("broker", "at_min_isr_partitions", "Partitions this broker leads whose ISR is exactly min(min.insync.replicas, replication factor): one more loss stops acks=all (Kafka's AtMinIsrPartitionCount)."),
		isrSize:           d("partition", "isr_size", "ISR size of a partition this broker leads, as committed in the metadata (Kafka's InSyncReplicasCount).", tp...),
		replicas:          d("partition", "replicas", "Replication factor of a partition this broker leads (Kafka's ReplicasCount).", tp...),
		offlinePartitions: d("controller", "offline_partitions", "Partitions without a leader (no eligible replica is alive), from the metadata image; reported by the active controller, 0 elsewhere (Kafka's OfflinePartitionsCount)."),
	}
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.info, c.connections, c.inFlight, c.partitions, c.partitionsLed, c.ready,
		c.metadataOffset, c.logSize, c.logSegments, c.logEnd, c.logStart, c.localLogStart, c.hw,
		c.recoveryPoint, c.leaderEpoch, c.recTruncated, c.recDroppedSegs, c.recLogsRecovered, c.recLogs, c.recSeconds,
		c.cleanerRuns, c.cleanerFailures, c.cleanerRead, c.cleanerWritten, c.cleanerDirty, c.cleanerMaxDirty,
		c.rolls, c.rollSeconds, c.flushes, c.flushSeconds, c.dirFree, c.dirMinFree, c.dirFull, c.dirOffline,
		c.reqMemUsed, c.reqMemWaiting, c.underReplicated, c.underMinISR, c.atMinISR, c.isrSize, c.replicas, c.reassigning} {
		ch <- d
	}
	if c.n.ctl != nil {
		ch <- c.offlinePartitions
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}

	if id := n.ClusterID(); id != "" { // known once registered
		gauge(c.info, 1, strconv.Itoa(int(n.cfg.NodeID)), id)
	}

	byListener := map[string]int{}
	for _, l := range n.cfg.ClientListeners() {
		byListener[l.Name] = 0
	}
	var inFlight int64
	n.connMu.Lock()
	for cn := range n.conns {
		byListener[cn.listener]++
		inFlight += int64(cn.pending.Load())
	}
	n.connMu.Unlock()
	for name, k := range byListener {
		gauge(c.connections, float64(k), name)
	}
	gauge(c.inFlight, float64(inFlight))
	gauge(c.reqMemUsed, float64(n.reqMem.Used()))
	gauge(c.reqMemWaiting, float64(n.reqMem.Waiting()))

	ok, _ := n.readiness()
	gauge(c.ready, b2f(ok))
	gauge(c.metadataOffset, float64(n.metadataOffset()))

	n.partsMu.RLock()
	parts := make([]*partition, 0, len(n.parts))
	for _, p := range n.parts {
		parts = append(parts, p)
	}
	n.partsMu.RUnlock()
	led := 0
	for _, p := range parts {
		tp := []string{p.topic, strconv.Itoa(int(p.index))}
		l := p.log
		epoch := int32(-1)
		if p.leader.Load() {
			led++
			epoch = p.leaderEpoch.Load()
		}
		gauge(c.logSize, float64(l.Size()), tp...)
		gauge(c.logSegments, float64(l.NumSegments()), tp...)
		gauge(c.logEnd, float64(l.LogEndOffset()), tp...)
		gauge(c.logStart, float64(l.LogStartOffset()), tp...)
		gauge(c.localLogStart, float64(l.LocalLogStartOffset()), tp...)
		gauge(c.hw, float64(p.hw.Load()), tp...)
		gauge(c.recoveryPoint, float64(l.RecoveryPoint()), tp...)
		gauge(c.leaderEpoch, float64(epoch), tp...)
		io := l.IOStats()
		ch <- prometheus.MustNewConstMetric(c.rolls, prometheus.CounterValue, float64(io.Rolls), tp...)
		ch <- prometheus.MustNewConstMetric(c.rollSeconds, prometheus.CounterValue, io.RollSeconds, tp...)
		ch <- prometheus.MustNewConstMetric(c.flushes, prometheus.CounterValue, float64(io.Flushes), tp...)
		ch <- prometheus.MustNewConstMetric(c.flushSeconds, prometheus.CounterValue, io.FlushSeconds, tp...)
	}
	gauge(c.partitions, float64(len(parts)))
	gauge(c.partitionsLed, float64(led))
	c.collectReplication(parts, gauge)

	if n.health.storeLoaded.Load() {
		for _, d := range n.store.Dirs() {
			if d.FreeBytes >= 0 {
				gauge(c.dirFree, float64(d.FreeBytes), d.Path)
			}
			gauge(c.dirMinFree, float64(n.cfg.LogDirMinFreeBytes), d.Path)
			gauge(c.dirFull, b2f(d.Full), d.Path)
			gauge(c.dirOffline, b2f(d.Failed), d.Path)
		}
		st := n.store.CleanerStats()
		counter := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
		}
		counter(c.cleanerRuns, st.Runs)
		counter(c.cleanerFailures, st.Failures)
		counter(c.cleanerRead, st.BytesRead)
		counter(c.cleanerWritten, st.BytesWritten)
		maxRatio := 0.0
		for _, lg := range st.Logs {
			gauge(c.cleanerDirty, lg.DirtyRatio, lg.Topic, strconv.Itoa(int(lg.Partition)))
			maxRatio = max(maxRatio, lg.DirtyRatio)
		}
		gauge(c.cleanerMaxDirty, maxRatio)
	}

	if r, ok := n.health.recovery.Load().(recoverySummary); ok {
		gauge(c.recTruncated, float64(r.truncatedBytes))
		gauge(c.recDroppedSegs, float64(r.droppedSegments))
		gauge(c.recLogsRecovered, float64(r.rescanned))
		gauge(c.recLogs, float64(r.logs))
		gauge(c.recSeconds, r.duration.Seconds())
	}
}

// replicationCounts are the ISR health of the partitions one broker leads.
type replicationCounts struct{ underReplicated, underMinISR, atMinISR int }

// add counts one led partition: ISR size isr, replication factor rf,
// min.insync.replicas minISR. The minimum is capped at the replication
// factor (Kafka's effectiveMinIsr, KIP-966), so an RF=1 topic with
// min.insync.replicas=2 is at, not under, its minimum.
func (r *replicationCounts) add(isr, rf, minISR int) {
	eff := min(minISR, rf)
	if isr < rf {
		r.underReplicated++
	}
	switch {
	case isr < eff:
		r.underMinISR++
	case isr == eff:
		r.atMinISR++
	}
}

// topicMinISR is min.insync.replicas of a topic's effective configs
// (topic, then dynamic broker config; reconcile keeps them), else the
// broker's static min.insync.replicas (def; Kafka's default 1).
func topicMinISR(cfgs map[string]string, def int32) int {
	if v, ok := cfgs[metadata.ConfigMinInsyncReplicas]; ok {
		if x, err := strconv.Atoi(v); err == nil && x >= 1 {
			return x
		}
	}
	return int(max(def, 1))
}

// collectReplication exports the ISR health of the partitions this broker
// leads (the ISR as the controller committed it, in the metadata image;
// the leader's own pending changes are not counted, as Kafka counts its
// committed partitionState.isr), and on a node running the controller the
// offline partition count.
func (c *nodeCollector) collectReplication(parts []*partition, gauge func(*prometheus.Desc, float64, ...string)) {
	n := c.n
	var counts replicationCounts
	offline, reassigning := 0, 0
	n.view(func(st *metadata.State) {
		for _, p := range parts {
			if !p.leader.Load() {
				continue
			}
			info, ok := st.Partition(p.topicID, p.index)
			if !ok || info.Leader != n.cfg.NodeID {
				continue
			}
			// During a reassignment the replication factor is the
			// original replicas' (Kafka's OngoingReassignmentState):
			// adding replicas still catching up are not missing ones.
			rf := len(info.Replicas) - len(info.AddingReplicas)
			if info.Reassigning() {
				reassigning++
			}
			counts.add(len(info.ISR), rf, topicMinISR(n.topicCfgs[p.topic], n.cfg.MinInsyncReplicas))
			tp := []string{p.topic, strconv.Itoa(int(p.index))}
			gauge(c.isrSize, float64(len(info.ISR)), tp...)
			gauge(c.replicas, float64(rf), tp...)
		}
		if n.ctl != nil && n.ctl.IsLeader() {
			for _, t := range st.Topics() {
				for _, p := range st.Partitions(t.ID) {
					if p.Leader == metadata.NoLeader {
						offline++
					}
				}
			}
		}
	})
	gauge(c.underReplicated, float64(counts.underReplicated))
	gauge(c.reassigning, float64(reassigning))
	gauge(c.underMinISR, float64(counts.underMinISR))
	gauge(c.atMinISR, float64(counts.atMinISR))
	if n.ctl != nil {
		gauge(c.offlinePartitions, float64(offline))
	}
}

// recoverySummary adds up the recovery reports of the logs storage loaded
// at start.
type recoverySummary struct {
	logs, rescanned, droppedSegments int
	truncatedBytes                   int64
	duration                         time.Duration
}

func summarizeRecovery(logs []*storage.Log, took time.Duration) recoverySummary {
	s := recoverySummary{logs: len(logs), duration: took}
	for _, l := range logs {
		r := l.Recovery()
		s.truncatedBytes += r.TruncatedBytes
		s.droppedSegments += r.DroppedSegments
		if r.Recovered {
			s.rescanned++
		}
	}
	return s
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metrics returns the node's metrics, nil (a no-op) for a request without
// a connection.
func (r *request) metrics() *metrics {
	if r.conn == nil {
		return nil
	}
	return r.conn.n.metrics
}
