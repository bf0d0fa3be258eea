package tiering

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/tiering/objstore"
)

// gaugeByTopic returns the value of a {topic} gauge family's series for
// topic, and whether the series exists.
func gaugeByTopic(t *testing.T, reg *prometheus.Registry, name, topic string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "topic" && l.GetValue() == topic {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// The gauges carry {topic} and follow the led partitions; a topic's
// series go when its last partition is resigned. Two uploaders share one
// registry.
func TestUploaderMetricsFollowLedPartitions(t *testing.T) {
	reg := prometheus.NewRegistry()
	meta := newTestMeta()
	meta.createTopic(t, "orders", upTopicID, 2)
	store := objstore.NewMemStore()
	u := newTestUploader(t, store, meta, nil, func(c *UploaderConfig) { c.Registerer = reg })
	newTestUploader(t, objstore.NewMemStore(), newTestMeta(), nil, func(c *UploaderConfig) { c.Registerer = reg })
	var tps []*testPart
	for i := range int32(2) {
		tp := openTestPart(t, nil, "", upPart("orders", i))
		tp.appendSegments(t, testTs, 1, 1, 1)
		tp.hw.Store(20) // the third segment waits
		u.Lead(tp.LeaderPartition)
		tps = append(tps, tp)
	}
	waitFor(t, u, "uploads", func() bool {
		return tps[0].Log.RemoteUploadedOffset() == 20 && tps[1].Log.RemoteUploadedOffset() == 20
	})
	u.Kick()
	var segSize int64
	for _, s := range tps[0].Log.Segments()[:1] {
		segSize = s.Size
	}
	waitFor(t, u, "gauges", func() bool {
		v, ok := gaugeByTopic(t, reg, MetricRemoteSegments, "orders")
		return ok && v == 4
	})
	if v, _ := gaugeByTopic(t, reg, MetricRemoteBytes, "orders"); v != float64(4*segSize) {
		t.Fatalf("remote bytes %v, want %d", v, 4*segSize)
	}
	tps[0].hw.Store(-1) // the third segment of partition 0 is committed now: upload lag
	sts := u.Statuses() // until a pass uploads it (one may already have run: then it is remote)
	uploaded := 4.0
	if len(sts) == 2 && sts[0].RemoteEnd == 29 {
		uploaded = 5 // a pass (a tick, or the manifest compaction's) ran first
		if sts[0].UploadLagSegments != 0 || sts[0].UploadLagBytes != 0 {
			t.Fatalf("statuses %+v: uploaded and still lagging", sts)
		}
	} else if len(sts) != 2 || sts[0].UploadLagSegments != 1 || sts[0].UploadLagBytes != segSize {
		t.Fatalf("statuses %+v", sts)
	}
	if sts[1].UploadLagSegments != 0 {
		t.Fatalf("statuses %+v", sts)
	}
	// (A pass may also finish between Statuses and this read.)
	if v := upMetricValue(t, u.metrics.uploadedSegments); v != uploaded && v != 5 {
		t.Fatalf("uploaded segments %v, want %v", v, uploaded)
	}
	u.Resign(upPart("orders", 0))
	if _, ok := gaugeByTopic(t, reg, MetricRemoteSegments, "orders"); !ok {
		t.Fatal("series dropped while a partition of the topic is still led")
	}
	u.Resign(upPart("orders", 1))
	for _, name := range []string{MetricUploadLagBytes, MetricUploadLagSegments, MetricLocalBytes, MetricRemoteBytes, MetricRemoteSegments} {
		if _, ok := gaugeByTopic(t, reg, name, "orders"); ok {
			t.Fatalf("%s{topic=orders} still exported after the last partition was resigned", name)
		}
	}
	if _, ok := u.Status(upPart("orders", 0)); ok {
		t.Fatal("status of a resigned partition")
	}
}

// concurrencyStore counts concurrent .log puts.
type concurrencyStore struct {
	objstore.ObjectStore
	mu       sync.Mutex
	cur, max int
}

func (c *concurrencyStore) Put(ctx context.Context, key string, r io.Reader, size int64, o objstore.PutOptions) (objstore.ObjectInfo, error) {
	if strings.HasSuffix(key, ".log") {
		c.mu.Lock()
		c.cur++
		c.max = max(c.max, c.cur)
		c.mu.Unlock()
		defer func() { c.mu.Lock(); c.cur--; c.mu.Unlock() }()
		time.Sleep(5 * time.Millisecond)
	}
	return c.ObjectStore.Put(ctx, key, r, size, o)
}

// Copies node-wide never exceed Threads, whatever the number of led
// partitions; and CopyMaxBytesPerSecond paces what is read (a lower
// bound: the copy cannot finish faster than the rate allows).
func TestUploaderPoolAndThrottleBoundCopies(t *testing.T) {
	meta := newTestMeta()
	meta.createTopic(t, "orders", upTopicID, 6)
	cs := &concurrencyStore{ObjectStore: objstore.NewMemStore()}
	u := newTestUploader(t, cs, meta, nil, func(c *UploaderConfig) { c.Threads = 2 })
	var tps []*testPart
	for i := range int32(6) {
		tp := openTestPart(t, nil, "", upPart("orders", i))
		tp.appendSegments(t, testTs, 1, 1, 1)
		u.Lead(tp.LeaderPartition)
		tps = append(tps, tp)
	}
	waitFor(t, u, "uploads", func() bool {
		for _, tp := range tps {
			if tp.Log.RemoteUploadedOffset() != 30 {
				return false
			}
		}
		return true
	})
	cs.mu.Lock()
	peak := cs.max
	cs.mu.Unlock()
	if peak > 2 || peak < 1 {
		t.Fatalf("peak concurrent copies %d with Threads=2", peak)
	}

	// The throttle: 40 KiB read in 8 KiB reads at 80 KiB/s. The first
	// read is free, the other 32 KiB wait their turn: at least 400ms.
	u2, err := NewUploader(UploaderConfig{Store: objstore.NewMemStore(), Meta: meta, CopyMaxBytesPerSecond: 80 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if u2.bucket == nil {
		t.Fatal("CopyMaxBytesPerSecond did not set a throttle")
	}
	// One second of burst (80 KiB), then 40 KiB more at 80 KiB/s.
	r := &throttledReader{ctx: testCtx(t), r: bytes.NewReader(make([]byte, 120<<10)), b: u2.bucket}
	start := time.Now()
	n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, make([]byte, 8<<10))
	if err != nil || n != 120<<10 {
		t.Fatalf("copied %d, %v", n, err)
	}
	if d := time.Since(start); d < 490*time.Millisecond {
		t.Fatalf("120 KiB at 80 KiB/s with 80 KiB of burst took %v, under the 500ms the rate allows", d)
	}
	// A cancelled context ends a throttled read.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r = &throttledReader{ctx: ctx, r: bytes.NewReader(make([]byte, 1<<20)), b: newTokenBucket(1, time.Now)}
	r.Read(make([]byte, 10))
	if _, err := r.Read(make([]byte, 10)); err == nil {
		t.Fatal("a throttled read ignored its cancelled context")
	}
}
