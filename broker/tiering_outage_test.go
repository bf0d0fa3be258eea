package broker

import (
	"context"
	crand "crypto/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/miniotest"
	"github.com/strata-io/strata/internal/testutil"
)

// TestTieringSurvivesMinIOOutage stops MinIO under load: producers and a
// tail consumer carry on, the upload-lag metric shows the backlog, uploads
// resume when MinIO returns, and nothing is lost.
func TestTieringSurvivesMinIOOutage(t *testing.T) {
	srv := miniotest.Start(t)
	settings := tierSettings(minioSettings(srv, srv.Bucket))
	settings["remote.storage.request.timeout.ms"] = "2000"
	settings["remote.storage.retry.max.attempts"] = "2"
	dir := t.TempDir()
	n := startNode(t, dir, settings)
	const topic = "outage"
	createTopic(t, newAdmin(t, n), topic, e2ePartitions, tieredTopicConfigs())
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))

	// A tail consumer, counting what it receives.
	var tail atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tailDone := make(chan struct{})
	go func() {
		defer close(tailDone)
		tc, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
		if err != nil {
			return
		}
		defer tc.Close()
		for ctx.Err() == nil {
			fs := tc.PollFetches(ctx)
			tail.Add(int64(fs.NumRecords()))
		}
	}()

	var prod produced
	// phase runs the producer for d in 256 KiB steps; every step's records
	// must be acknowledged (produceE2E fails the test otherwise).
	phase := func(d time.Duration) {
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			produceE2E(t, cl, topic, 256<<10, &prod)
			time.Sleep(50 * time.Millisecond)
		}
	}
	phase(3 * time.Second)
	waitUploaded(t, n, topic, time.Minute)

	srv.Stop()
	tailBefore, prodBefore := tail.Load(), prod
	phase(6 * time.Second)
	if prod == prodBefore {
		t.Fatal("producer made no progress while MinIO was down")
	}
	if err := testutil.Within(10*time.Second, func() bool { return tail.Load() != tailBefore }); err != nil {
		t.Fatal("tail consumer made no progress while MinIO was down")
	}
	lag, ok := scrapeMetrics(t, n).value("strata_tiering_upload_lag_bytes", "topic", topic)
	if !ok || lag <= 0 {
		t.Fatalf("upload lag metric during the outage = %v (found %v), want > 0", lag, ok)
	}
	t.Logf("during the outage: upload lag %v bytes", lag)

	srv.Restart(t)
	phase(2 * time.Second)
	rollAll(t, n, topic)
	waitUploaded(t, n, topic, 2*time.Minute)
	if lag, _ := scrapeMetrics(t, n).value("strata_tiering_upload_lag_bytes", "topic", topic); lag != 0 {
		t.Fatalf("upload lag after recovery = %v, want 0", lag)
	}
	cancel()
	<-tailDone
	consumeAllE2E(t, n, topic, prod)
}

// TestNodeRestartsWhileMinIODown: a broker restarted during an object-store
// outage starts (it warns), serves its local data and takes produce; its
// backlog uploads once MinIO answers again, and the remote part is read
// back. Nothing from the bucket is replayed before partitions serve: the
// remote segments are in the controller's metadata.
func TestNodeRestartsWhileMinIODown(t *testing.T) {
	srv := miniotest.Start(t)
	settings := tierSettings(minioSettings(srv, srv.Bucket))
	settings["remote.storage.request.timeout.ms"] = "1000"
	settings["remote.storage.retry.max.attempts"] = "1"
	dir := t.TempDir()
	n := startNode(t, dir, settings)
	const topic = "restart-down"
	createTopic(t, newAdmin(t, n), topic, e2ePartitions, tieredTopicConfigs())
	var prod produced
	produceE2E(t, newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner())), topic, 6<<20, &prod)
	rollAll(t, n, topic)
	waitUploaded(t, n, topic, time.Minute)
	n.Close()

	srv.Stop()
	start := time.Now()
	n = startNode(t, dir, settings)
	t.Logf("restarted with MinIO down in %v", time.Since(start))
	produceE2E(t, newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner())), topic, 3<<20, &prod)
	rollAll(t, n, topic)
	srv.Restart(t)
	waitUploaded(t, n, topic, time.Minute)
	consumeAllE2E(t, n, topic, prod)
}

// TestNodeClosesWhileMinIODown: a node whose uploads are stuck retrying
// against a stopped MinIO still shuts down promptly (the uploader's
// object-store calls end with their contexts) and cleanly.
func TestNodeClosesWhileMinIODown(t *testing.T) {
	srv := miniotest.Start(t)
	settings := tierSettings(minioSettings(srv, srv.Bucket))
	n := startNode(t, t.TempDir(), settings)
	const topic = "close-down"
	createTopic(t, newAdmin(t, n), topic, e2ePartitions, tieredTopicConfigs())
	srv.Stop()
	var prod produced
	produceE2E(t, newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner())), topic, 4<<20, &prod)
	rollAll(t, n, topic)
	if err := testutil.Within(10*time.Second, func() bool {
		lag, _ := scrapeMetrics(t, n).value("strata_tiering_upload_lag_bytes", "topic", topic)
		return lag > 0 // uploads are pending and failing
	}); err != nil {
		t.Fatal("no upload lag while MinIO is down")
	}
	start := time.Now()
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Fatalf("close took %v with MinIO down", el)
	} else {
		t.Logf("closed in %v with uploads stuck", el)
	}
}

// TestTieringResumesWithinSecondsOfMinIOReturning: after an outage long
// enough for every partition's retry pause to have grown to seconds (the
// backoff cap set to 30 s), uploads of every partition resume within a
// few seconds of MinIO answering again: the store probe wakes them.
func TestTieringResumesWithinSecondsOfMinIOReturning(t *testing.T) {
	srv := miniotest.Start(t)
	settings := tierSettings(minioSettings(srv, srv.Bucket))
	settings["remote.storage.request.timeout.ms"] = "2000"
	settings["remote.storage.retry.max.attempts"] = "2"
	settings["remote.storage.retry.backoff.max.ms"] = "30000"
	n := startNode(t, t.TempDir(), settings)
	const topic, parts = "resume", 3
	s := func(v string) *string { return &v }
	createTopic(t, newAdmin(t, n), topic, parts, map[string]*string{
		"remote.storage.enable": s("true"), "segment.bytes": s("16384"), "retention.ms": s("-1"),
	})
	srv.Stop()
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(parts) {
		for range 40 {
			v := make([]byte, 1000)
			crand.Read(v)
			if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: p, Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.partition(topic, p).log.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	// Two copier threads (the default pool): two partitions retry, eight
	// failed attempts each, pauses of up to 0.1, 0.2, ... 6.4 s; the
	// next is drawn from [6.4 s, 12.8 s].
	start := time.Now()
	deadline := start.Add(time.Minute)
	for gatheredCounter(t, n, "strata_tiering_upload_errors_total") < 16 {
		if time.Now().After(deadline) {
			t.Fatal("uploads did not fail while MinIO was down")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("MinIO down %v (%v upload errors)", time.Since(start).Round(time.Millisecond), gatheredCounter(t, n, "strata_tiering_upload_errors_total"))
	srv.Restart(t)
	back := time.Now()
	deadline = back.Add(time.Minute)
	for {
		st, err := n.TierStatus(topic)
		if err != nil {
			t.Fatal(err)
		}
		done := len(st) == parts
		for _, s := range st {
			done = done && s.UploadLagSegments == 0 && s.RemoteSegments > 0
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backlog not uploaded a minute after MinIO returned: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	d := time.Since(back)
	t.Logf("every partition's backlog uploaded %v after MinIO returned", d)
	if d > 3*time.Second {
		t.Fatalf("uploads resumed %v after MinIO returned, want within a few seconds", d)
	}
}
