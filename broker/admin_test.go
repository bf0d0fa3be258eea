package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage"
)

// httpGet fetches http://addr+path and returns the status and body.
func httpGet(t testing.TB, addr, path string) (int, string) {
	t.Helper()
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// scrape is one parsed /metrics answer.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(t testing.TB, n *Node) scrape {
	t.Helper()
	code, body := httpGet(t, n.AdminAddr(), "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of name whose labels include
// labels (name=value pairs), summed over every matching series (a
// histogram gives its sample count); ok is false when none matches.
func (s scrape) value(name string, labels ...string) (float64, bool) {
	fam := s[name]
	if fam == nil {
		return 0, false
	}
	var sum float64
	found := false
next:
	for _, m := range fam.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			ok := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					ok = true
				}
			}
			if !ok {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, found
}

// get is value, failing the test when no series matches.
func (s scrape) get(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.value(name, labels...)
	if !ok {
		t.Fatalf("/metrics has no %s%v", name, labels)
	}
	return v
}

// waitMetric polls /metrics until cond holds for name's value, or fails
// after testWait.
func waitMetric(t testing.TB, n *Node, cond func(float64) bool, name string, labels ...string) {
	t.Helper()
	if err := testutil.Within(testWait, func() error {
		v, ok := scrapeMetrics(t, n).value(name, labels...)
		if ok && cond(v) {
			return nil
		}
		return fmt.Errorf("%s%v = %v (found %v): condition not met within %v", name, labels, v, ok, testWait)
	}); err != nil {
		t.Fatal(err)
	}
}

func TestAdminHealthzReadyzAndPprofOnAStartedNode(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	if n.AdminAddr() == "" || n.Addrs()["ADMIN"] != n.AdminAddr() {
		t.Fatalf("admin address %q, Addrs %v", n.AdminAddr(), n.Addrs())
	}
	if code, body := httpGet(t, n.AdminAddr(), "/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := httpGet(t, n.AdminAddr(), "/readyz"); code != 200 || strings.TrimSpace(body) != "ready" {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	if code, body := httpGet(t, n.AdminAddr(), "/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/: %d %.200q", code, body)
	}
	if code, body := httpGet(t, n.AdminAddr(), "/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("/debug/pprof/goroutine: %d %.200q", code, body)
	}
	s := scrapeMetrics(t, n)
	if v := s.get(t, "strata_broker_ready"); v != 1 {
		t.Fatalf("strata_broker_ready = %v", v)
	}
	if v := s.get(t, "strata_broker_info", "node_id", "1", "cluster_id", n.ClusterID()); v != 1 {
		t.Fatalf("strata_broker_info = %v", v)
	}
	// The controller's, Go's and the process's collectors are on the same
	// registry.
	for _, name := range []string{"strata_controller_raft_term", "go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := s.value(name); !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	addr := n.AdminAddr()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, failing := n.readiness(); ok || !strings.Contains(strings.Join(failing, "\n"), "not serving") {
		t.Fatalf("readiness after Close: %v %v", ok, failing)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("admin listener still accepting after Close")
	}
}

// TestAdminReadyzIsNotReadyBeforeStartCompletes starts a broker-only node
// whose controller quorum does not answer: Open waits for registration,
// and meanwhile the admin listener (bound first) answers /healthz 200 and
// /readyz 503 naming the checks that fail. When Open gives up, the admin
// listener is closed with everything else.
func TestAdminReadyzIsNotReadyBeforeStartCompletes(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there: the quorum never answers
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, t.TempDir(), map[string]string{
		"node.id":                  "2",
		"process.roles":            "broker",
		"listeners":                "PLAINTEXT://127.0.0.1:0",
		"controller.quorum.voters": "1@" + deadAddr,
	})
	opened := make(chan error, 1)
	go func() {
		n, err := Open(Options{Config: cfg, Logger: testLogger(), StartTimeout: 3 * time.Second, AdminListener: adminLn})
		if err == nil {
			n.Close()
			err = errors.New("Open succeeded without a controller")
		}
		opened <- err
	}()
	addr := adminLn.Addr().String()
	if code, body := httpGet(t, addr, "/healthz"); code != 200 {
		t.Fatalf("/healthz while starting: %d %q", code, body)
	}
	code, body := httpGet(t, addr, "/readyz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while starting: %d %q, want 503", code, body)
	}
	for _, want := range []string{"controller: no leader", "broker: not registered", "node: not serving"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz body %q lacks %q", body, want)
		}
	}
	code, body = httpGet(t, addr, "/metrics")
	if code != 200 || !strings.Contains(body, "\nstrata_broker_ready 0\n") {
		t.Fatalf("/metrics while starting: %d, strata_broker_ready 0 missing", code)
	}
	select {
	case err := <-opened:
		if err == nil || strings.Contains(err.Error(), "succeeded") {
			t.Fatalf("Open: %v", err)
		}
	case <-time.After(testWait):
		t.Fatal("Open did not give up")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("admin listener still accepting after a failed Open")
	}
}

// TestMetricsCountRequestsBytesAndMessages drives a node with kgo and a
// raw connection and checks that each counter moved by exactly what was
// done: requests by API/version/error, latency samples, per-partition
// errors, bytes and messages in and out per topic (against the log's own
// size), log offsets, partitions led, connections.
func TestMetricsCountRequestsBytesAndMessages(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "metered", 2, nil)

	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const perPart = 20
	var recs []*kgo.Record
	for i := range 2 * perPart {
		recs = append(recs, &kgo.Record{Topic: "metered", Partition: int32(i % 2),
			Key: []byte{byte(i)}, Value: []byte(strings.Repeat("v", 100+i)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	s := scrapeMetrics(t, n)
	var logBytes float64
	for _, p := range []string{"0", "1"} {
		tp := []string{"topic", "metered", "partition", p}
		if v := s.get(t, "strata_log_end_offset", tp...); v != perPart {
			t.Errorf("log end offset of partition %s = %v, want %d", p, v, perPart)
		}
		if v := s.get(t, "strata_log_high_watermark", tp...); v != perPart {
			t.Errorf("high watermark of partition %s = %v, want %d", p, v, perPart)
		}
		if v := s.get(t, "strata_log_start_offset", tp...); v != 0 {
			t.Errorf("log start offset of partition %s = %v", p, v)
		}
		if v := s.get(t, "strata_log_segments", tp...); v != 1 {
			t.Errorf("segments of partition %s = %v", p, v)
		}
		logBytes += s.get(t, "strata_log_size_bytes", tp...)
	}
	if logBytes == 0 {
		t.Fatal("log size 0 after producing")
	}
	// Bytes in are the batches as appended: exactly what the logs hold.
	if v := s.get(t, "strata_topic_bytes_in_total", "topic", "metered"); v != logBytes {
		t.Errorf("bytes in %v, logs hold %v", v, logBytes)
	}
	if v := s.get(t, "strata_topic_messages_in_total", "topic", "metered"); v != 2*perPart {
		t.Errorf("messages in %v, want %d", v, 2*perPart)
	}
	if v := s.get(t, "strata_broker_partitions_led"); v != 2 {
		t.Errorf("partitions led %v", v)
	}
	if v := s.get(t, "strata_broker_partitions"); v != 2 {
		t.Errorf("partitions %v", v)
	}
	// A request is counted once its response is written, just after the
	// client has its answer: scrape until the counts settle.
	var produced, samples float64
	testutil.Within(5*time.Second, func() bool { // asserted just below
		ps := scrapeMetrics(t, n)
		produced, _ = ps.value("strata_broker_requests_total", "api", "Produce", "error", "NONE")
		samples, _ = ps.value("strata_broker_request_duration_seconds", "api", "Produce")
		return produced >= 1 && samples == produced
	})
	if produced < 1 || samples != produced {
		t.Errorf("Produce: %v requests, %v latency samples", produced, samples)
	}
	if v := s.get(t, "strata_broker_connections_opened_total", "listener", "PLAINTEXT"); v < 1 {
		t.Errorf("connections opened %v", v)
	}

	// Consume everything once: bytes out equal the bytes stored.
	cons := newClient(t, n, kgo.ConsumeTopics("metered"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	ctx := testCtx(t)
	for got < 2*perPart {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, 2*perPart, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got += fs.NumRecords()
	}
	cons.Close() // no more fetches: bytes out stop moving
	s = scrapeMetrics(t, n)
	if v := s.get(t, "strata_topic_bytes_out_total", "topic", "metered"); v != logBytes {
		t.Errorf("bytes out %v, want the %v bytes stored (each batch sent once)", v, logBytes)
	}
	if v := s.get(t, "strata_broker_requests_total", "api", "Fetch", "error", "NONE"); v < 1 {
		t.Errorf("fetch requests %v", v)
	}

	// Exact request counts on a raw connection: three ApiVersions v3,
	// one of an unknown version (the KIP-511 fallback), a Produce to a
	// partition that does not exist and a Fetch at an offset out of
	// range.
	before := scrapeMetrics(t, n)
	rc := dialRaw(t, n)
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	for range 3 {
		rc.roundTrip(av)
	}
	avBad := kmsg.NewPtrApiVersionsRequest()
	avBad.SetVersion(30000)
	rc.send(avBad)
	if _, _, err := rc.readFrame(); err != nil {
		t.Fatal(err)
	}
	if code, _ := produceErr(t, rc.roundTrip(produceReq(9, "metered", [16]byte{}, 7, 1, recordBatch(0, "x")))); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce to partition 7: code %d", code)
	}
	fr := rc.roundTrip(fetchReq(11, "metered", [16]byte{}, 0, 1000, 0, 1, 1<<20)).(*kmsg.FetchResponse)
	if c := fr.Topics[0].Partitions[0].ErrorCode; c != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch at 1000: code %d", c)
	}
	// A request is counted once its response is written (its duration
	// includes the write), so the last one may land just after the
	// client has its answer: scrape until the counts settle.
	var after scrape
	delta := func(name string, labels ...string) float64 {
		b, _ := before.value(name, labels...)
		v, _ := after.value(name, labels...)
		return v - b
	}
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"strata_broker_requests_total", []string{"api", "ApiVersions", "version", "3", "error", "NONE"}, 3},
		{"strata_broker_requests_total", []string{"api", "ApiVersions", "version", "unsupported", "error", "UNSUPPORTED_VERSION"}, 1},
		{"strata_broker_request_duration_seconds", []string{"api", "ApiVersions"}, 4},
		{"strata_broker_requests_total", []string{"api", "Produce", "version", "9", "error", "NONE"}, 1},
		{"strata_broker_partition_errors_total", []string{"api", "Produce", "error", errorName(kerr.UnknownTopicOrPartition.Code)}, 1},
		{"strata_broker_requests_total", []string{"api", "Fetch", "version", "11", "error", "NONE"}, 1},
		{"strata_broker_partition_errors_total", []string{"api", "Fetch", "error", errorName(kerr.OffsetOutOfRange.Code)}, 1},
		{"strata_broker_connections_opened_total", []string{"listener", "PLAINTEXT"}, 1},
	}
	settled := func() bool {
		for _, c := range checks {
			if delta(c.name, c.labels...) != c.want {
				return false
			}
		}
		return true
	}
	testutil.Within(5*time.Second, func() bool { // asserted just below
		after = scrapeMetrics(t, n)
		return settled()
	})
	for _, c := range checks {
		if got := delta(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v moved by %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if v := after.get(t, "strata_broker_connections", "listener", "PLAINTEXT"); v < 1 {
		t.Errorf("open connections %v with a raw connection open", v)
	}
	// The raw connection closes: the close is counted.
	closedBefore, _ := after.value("strata_broker_connections_closed_total", "listener", "PLAINTEXT")
	rc.nc.Close()
	waitMetric(t, n, func(v float64) bool { return v >= closedBefore+1 }, "strata_broker_connections_closed_total", "listener", "PLAINTEXT")
}

// TestMetricsInFlightShowsAWaitingLongPoll parks a Fetch in its long poll
// and finds it in strata_broker_requests_in_flight; a produce wakes it,
// and its latency is observed once it is answered.
func TestMetricsInFlightShowsAWaitingLongPoll(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "poll", 1, nil)
	rc := dialRaw(t, n)
	before, _ := scrapeMetrics(t, n).value("strata_broker_request_duration_seconds", "api", "Fetch")
	rc.send(fetchReq(11, "poll", [16]byte{}, 0, 0, 15000, 1, 1<<20))
	waitMetric(t, n, func(v float64) bool { return v >= 1 }, "strata_broker_requests_in_flight")

	pc := dialRaw(t, n)
	if code, _ := produceErr(t, pc.roundTrip(produceReq(9, "poll", [16]byte{}, 0, 1, recordBatch(0, "wake")))); code != 0 {
		t.Fatalf("produce: code %d", code)
	}
	if _, _, err := rc.readFrame(); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, n, func(v float64) bool { return v == 0 }, "strata_broker_requests_in_flight")
	if v := scrapeMetrics(t, n).get(t, "strata_broker_request_duration_seconds", "api", "Fetch"); v != before+1 {
		t.Fatalf("fetch latency samples %v, want %v", v, before+1)
	}
}

// TestMetricsReportStorageRecoveryAtStart damages a log's tail after a
// clean stop, removes the clean-shutdown marker, and restarts: the
// recovery metrics report the torn bytes cut.
func TestMetricsReportStorageRecoveryAtStart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	createTopic(t, newAdmin(t, n), "torn", 1, nil)
	rc := dialRaw(t, n)
	if code, _ := produceErr(t, rc.roundTrip(produceReq(9, "torn", [16]byte{}, 0, 1, recordBatch(0, "a", "b")))); code != 0 {
		t.Fatalf("produce: code %d", code)
	}
	s := scrapeMetrics(t, n)
	if v := s.get(t, "strata_storage_recovery_truncated_bytes"); v != 0 {
		t.Fatalf("truncated bytes %v on a fresh node", v)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "torn-0", "00000000000000000000"+storage.LogFileSuffix)
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	const junk = 37
	if _, err := f.Write(make([]byte, junk)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Remove(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
		t.Fatal(err)
	}

	n2 := startNode(t, dir, nil)
	s = scrapeMetrics(t, n2)
	if v := s.get(t, "strata_storage_recovery_truncated_bytes"); v != junk {
		t.Errorf("truncated bytes %v, want %d", v, junk)
	}
	if v := s.get(t, "strata_storage_recovery_logs_rescanned"); v < 1 {
		t.Errorf("logs rescanned %v", v)
	}
	if v := s.get(t, "strata_storage_recovery_logs_loaded"); v < 1 {
		t.Errorf("logs loaded %v", v)
	}
	if v := s.get(t, "strata_log_end_offset", "topic", "torn", "partition", "0"); v != 2 {
		t.Errorf("log end offset %v after recovery, want 2", v)
	}
}

// TestMetricsDeletedTopicLeavesTheScrape deletes a topic and finds its
// per-topic and per-partition series gone.
func TestMetricsDeletedTopicLeavesTheScrape(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "gone", 1, nil)
	rc := dialRaw(t, n)
	if code, _ := produceErr(t, rc.roundTrip(produceReq(9, "gone", [16]byte{}, 0, 1, recordBatch(0, "x")))); code != 0 {
		t.Fatalf("produce: code %d", code)
	}
	if _, ok := scrapeMetrics(t, n).value("strata_topic_bytes_in_total", "topic", "gone"); !ok {
		t.Fatal("no bytes-in series for the topic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if resp, err := adm.DeleteTopics(ctx, "gone"); err != nil || resp["gone"].Err != nil {
		t.Fatalf("delete: %v %v", err, resp)
	}
	if err := testutil.Within(testWait, func() error {
		s := scrapeMetrics(t, n)
		_, in := s.value("strata_topic_bytes_in_total", "topic", "gone")
		_, size := s.value("strata_log_size_bytes", "topic", "gone")
		if in || size {
			return fmt.Errorf("series of a deleted topic remain: bytes in %v, log size %v", in, size)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsScrapesRaceNothing scrapes /metrics in a loop while topics
// are created, produced to, consumed and deleted: under -race, the
// scrape-time collector must read partitions, logs and connections
// safely, and every scrape must parse.
func TestMetricsScrapesRaceNothing(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	stop := make(chan struct{})
	scraped := make(chan int)
	go func() {
		k := 0
		defer func() { scraped <- k }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := http.Get("http://" + n.AdminAddr() + "/metrics")
			if err != nil {
				return
			}
			p := expfmt.NewTextParser(model.UTF8Validation)
			_, perr := p.TextToMetricFamilies(resp.Body)
			resp.Body.Close()
			if perr != nil || resp.StatusCode != 200 {
				return
			}
			k++
		}
	}()
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 3 {
		name := "churn" + string(rune('a'+i))
		createTopic(t, adm, name, 3, nil)
		for j := range 3 {
			if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: name, Partition: int32(j), Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if resp, err := adm.DeleteTopics(testCtx(t), name); err != nil || resp[name].Err != nil {
			t.Fatalf("delete %s: %v %v", name, err, resp)
		}
	}
	close(stop)
	if k := <-scraped; k < 2 {
		t.Fatalf("only %d scrapes succeeded", k)
	}
}

// TestAdminReadyzTurnsUnreadyWhenTheControllerIsGone runs a broker-only
// node beside a combined one, then stops the combined node (the whole
// quorum): once no heartbeat has been answered for
// broker.session.timeout.ms, the broker-only node's /readyz turns 503
// naming the controller, while /healthz stays 200.
func TestAdminReadyzTurnsUnreadyWhenTheControllerIsGone(t *testing.T) {
	a := startNode(t, t.TempDir(), nil)
	b := startNode(t, t.TempDir(), map[string]string{
		"node.id":                      "2",
		"process.roles":                "broker",
		"listeners":                    "PLAINTEXT://127.0.0.1:0",
		"controller.quorum.voters":     "1@" + a.Addrs()["CONTROLLER"],
		"broker.heartbeat.interval.ms": "100",
		"broker.session.timeout.ms":    "1000",
	})
	if code, body := httpGet(t, b.AdminAddr(), "/readyz"); code != 200 {
		t.Fatalf("/readyz of the broker-only node: %d %q", code, body)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Within(testWait, func() error {
		code, body := httpGet(t, b.AdminAddr(), "/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "controller: no leader") {
			return nil
		}
		return fmt.Errorf("/readyz still %d %q with the quorum gone", code, body)
	}); err != nil {
		t.Fatal(err)
	}
	if code, _ := httpGet(t, b.AdminAddr(), "/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
}

func TestAdminListenerSettingIsValidatedAndCanBeTurnedOff(t *testing.T) {
	props := map[string]string{"admin.listener": "no-port-here"}
	if _, err := ParseConfig(MergeProperties(props, nil, nil)); err == nil || !strings.Contains(err.Error(), "admin.listener") {
		t.Fatalf("admin.listener without a port: %v", err)
	}
	n := startNode(t, t.TempDir(), map[string]string{"admin.listener": ""})
	if a := n.AdminAddr(); a != "" {
		t.Fatalf("admin listener %q with admin.listener empty", a)
	}
	if _, ok := n.Addrs()["ADMIN"]; ok {
		t.Fatalf("Addrs lists ADMIN: %v", n.Addrs())
	}
	// The metrics are still kept, for a caller serving the registry.
	if fams, err := n.Registry().Gather(); err != nil || len(fams) == 0 {
		t.Fatalf("gather: %d families, %v", len(fams), err)
	}
}
