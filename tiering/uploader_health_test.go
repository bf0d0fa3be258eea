package tiering

import (
	"github.com/strata-io/strata/internal/testutil"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/tiering/objstore"
)

// TestUploaderResumesSoonAfterTheStoreReturns: after an outage long
// enough for a partition's retry pause to have grown to seconds, the
// upload resumes within about a probe period of the store answering
// again, not when the pause ends; the outage is one warning node-wide,
// the recovery one line with the backlog, and its draining another.
func TestUploaderResumesSoonAfterTheStoreReturns(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 2)
	faults := objstore.WithFaults(objstore.NewMemStore())
	faults.Down()
	logs := &testutil.SyncBuffer{}
	u := newTestUploader(t, faults, meta, nil, func(c *UploaderConfig) {
		c.RetryBackoffMax = 30 * time.Second
		c.Interval = 50 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	u.backoffBase = 50 * time.Millisecond // newTestUploader's 1ms would never grow far
	u.Lead(tp.LeaderPartition)
	// Pauses of at most 50, 100, ... 1600 ms; after the 8th failure (one
	// may be the orphan scan's) the pause is drawn from [1.6 s, 3.2 s].
	waitFor(t, nil, "eight failed attempts", func() bool { return upMetricValue(t, u.metrics.errors) >= 8 })
	faults.Up()
	up := time.Now()
	waitFor(t, nil, "segment uploaded", func() bool { return len(meta.finished(p.TopicID, 0)) == 1 })
	if d := time.Since(up); d > 1300*time.Millisecond {
		t.Fatalf("upload resumed %v after the store came back, want within ~%v", d, probeEvery)
	}
	waitFor(t, nil, "drain logged", func() bool { return strings.Contains(logs.String(), "upload backlog drained") })
	out := logs.String()
	if n := strings.Count(out, "object store unreachable"); n != 1 {
		t.Fatalf("%d outage warnings, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "object store reachable again") || !strings.Contains(out, "backlog_segments=1") {
		t.Fatalf("no recovery line with the backlog:\n%s", out)
	}
	if strings.Contains(out, "level=WARN msg=\"tiering step failed") {
		t.Fatalf("per-step warnings during a store outage:\n%s", out)
	}
}

// TestUploaderRetryPausesAreCappedByTheConfiguredMax: with
// remote.storage.retry.backoff.max.ms small, a failing step is retried at
// that pace, not the old fixed 30 s cap's.
func TestUploaderRetryPausesAreCappedByTheConfiguredMax(t *testing.T) {
	_, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 1)
	faults := objstore.WithFaults(objstore.NewMemStore())
	faults.Down()
	u := newTestUploader(t, faults, meta, nil, func(c *UploaderConfig) {
		c.RetryBackoff, c.RetryBackoffMax = 20*time.Millisecond, 40*time.Millisecond
	})
	u.backoffBase = 20 * time.Millisecond
	if u.backoffMax != 40*time.Millisecond {
		t.Fatalf("backoff max %v, want the configured 40ms", u.backoffMax)
	}
	u.Lead(tp.LeaderPartition)
	start := time.Now()
	waitFor(t, nil, "30 failed attempts", func() bool { return upMetricValue(t, u.metrics.errors) >= 30 })
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("30 attempts took %v with a 40ms cap", d)
	}
}
