package tiering

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/tiering/objstore"
)

// Local retention may delete only what the controller has committed as
// remote: with every PUT failing nothing is ever deleted locally, however
// tiny local.retention.bytes is; with PUTs working but COPY_FINISHED
// refused, objects and manifest exist yet the uploaded offset stays put.
func TestUploaderUploadedOffsetAdvancesOnlyAfterCopyFinished(t *testing.T) {
	p, meta, tp := ordersPart(t, func(c *storage.Config) { c.LocalRetentionBytes = 1 })
	tp.appendSegments(t, testTs, 2, 2, 2)
	before := tp.Log.NumSegments()

	faults := objstore.WithFaults(objstore.NewMemStore(), objstore.Rule{Op: objstore.OpPut, Err: objstore.ErrInjected})
	u := newTestUploader(t, faults, meta, nil)
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "failed puts", func() bool { return upMetricValue(t, u.metrics.errors) >= 8 })
	if n, err := tp.Log.EnforceRetention(time.Now()); err != nil || n != 0 {
		t.Fatalf("EnforceRetention deleted %d (err %v) with nothing uploaded", n, err)
	}
	if got := tp.Log.RemoteUploadedOffset(); got != -1 {
		t.Fatalf("RemoteUploadedOffset = %d with every PUT failing", got)
	}
	if len(meta.finished(p.TopicID, 0)) != 0 || tp.Log.NumSegments() != before {
		t.Fatal("something finished or was deleted with every PUT failing")
	}
	u.Close()

	// PUTs work, COPY_FINISHED is refused.
	meta2 := newTestMeta()
	meta2.createTopic(t, p.Topic, p.TopicID, 1)
	refused := errors.New("controller unavailable")
	meta2.setFailCommit(func(r metadata.RemoteSegmentRecord) error {
		if r.State == metadata.CopyFinished {
			return refused
		}
		return nil
	})
	store := objstore.NewMemStore()
	u2 := newTestUploader(t, store, meta2, nil)
	u2.Lead(tp.LeaderPartition)
	waitFor(t, u2, "manifest written", func() bool {
		m, _, err := NewManifestStore(store).Load(testCtx(t), ManifestKey("strata", p.Topic, p.TopicID, 0))
		return err == nil && len(m.Segments) == 1
	})
	waitFor(t, u2, "COPY_FINISHED retried", func() bool { return upMetricValue(t, u2.metrics.errors) >= 5 })
	if got := tp.Log.RemoteUploadedOffset(); got != -1 {
		t.Fatalf("RemoteUploadedOffset = %d before COPY_FINISHED was committed", got)
	}
	if n, _ := tp.Log.EnforceRetention(time.Now()); n != 0 {
		t.Fatalf("EnforceRetention deleted %d segments before COPY_FINISHED", n)
	}
	meta2.setFailCommit(nil)
	waitFor(t, u2, "all uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == 60 })
	checkCoverage(t, meta2, p, 0, 59)
	// Now uploaded, local retention may go: all but the newest sealed
	// segment (the log minus it would be below local.retention.bytes=1).
	if n, err := tp.Log.EnforceRetention(time.Now()); err != nil || n != 2 {
		t.Fatalf("EnforceRetention deleted %d (err %v), want 2 uploaded segments", n, err)
	}
}

// Injected errors, latency and lost PUT acknowledgements on every kind of
// call: everything is eventually uploaded, each offset range exactly once
// (no hole, no overlap, no COPY_STARTED left), and the bucket holds no
// object that no segment names.
func TestUploaderUnderFaultsUploadsEverythingExactlyOnce(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 1, 2, 1, 3, 1, 1, 2, 1, 1, 2)
	mem := objstore.NewMemStore()
	faults := objstore.WithFaults(mem,
		objstore.Rule{Prob: 0.15, Err: objstore.ErrInjected},
		objstore.Rule{Op: objstore.OpPut, Prob: 0.25, LostAck: true, Err: objstore.ErrInjected},
		objstore.Rule{Prob: 0.3, Latency: 2 * time.Millisecond},
	)
	faults.Seed(7)
	lost := faults.Add(objstore.Rule{Op: objstore.OpPut, Key: "strata/*/0/*.log", Nth: 2, LostAck: true, Err: objstore.ErrInjected})
	u := newTestUploader(t, faults, meta, nil)
	u.Lead(tp.LeaderPartition)
	end := tp.Log.LogEndOffset() - 1
	waitFor(t, u, "everything uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == end+1 })
	if faults.Fired(lost) != 1 || faults.Fired(0) == 0 || faults.Fired(1) == 0 {
		t.Fatalf("rules fired %d, %d, %d times", faults.Fired(0), faults.Fired(1), faults.Fired(lost))
	}
	checkCoverage(t, meta, p, 0, end)
	for _, s := range meta.RemoteSegments(p.TopicID, 0) {
		if s.State != metadata.CopyFinished {
			t.Fatalf("segment %s left in %s", s.SegmentID, s.State)
		}
	}
	faults.Clear()
	named := map[string]bool{ManifestKey("strata", p.Topic, p.TopicID, 0): true}
	for _, s := range meta.finished(p.TopicID, 0) {
		for _, ext := range PackedSegmentExts {
			named[FromInfo(p.Topic, s).Key("strata", ext)] = true
		}
	}
	for _, k := range withoutChunks(mem.Keys()) {
		if !named[k] {
			t.Errorf("object %s is named by no segment", k)
		}
		delete(named, k)
	}
	if len(named) > 0 {
		t.Errorf("missing objects: %v", named)
	}
	m, _, err := NewManifestStore(mem).Load(testCtx(t), ManifestKey("strata", p.Topic, p.TopicID, 0))
	if err != nil || len(m.Segments) != len(meta.finished(p.TopicID, 0)) {
		t.Fatalf("manifest has %d segments (err %v), metadata %d", len(m.Segments), err, len(meta.finished(p.TopicID, 0)))
	}
}

// A lost acknowledgement whose object turns out not to be ours (another
// size under the key) is not trusted: the copy restarts under a new
// segment id and the abandoned one is deleted.
func TestUploaderLostAckWithWrongObjectRestartsUnderNewID(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 2)
	mem := objstore.NewMemStore()
	// The first .meta put answers precondition-failed while a 1-byte
	// object sits under its key: not what we put.
	faults := objstore.WithFaults(&squatter{MemStore: mem}, objstore.Rule{Op: objstore.OpPut, Key: "strata/*/0/*.meta", Nth: 1, Err: objstore.ErrPreconditionFailed})
	u := newTestUploader(t, faults, meta, nil)
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == 20 })
	checkCoverage(t, meta, p, 0, 19)
	var started []string // distinct ids, in order (a copy commits COPY_STARTED twice: the fence probe)
	for _, c := range meta.committed() {
		if c.State == metadata.CopyStarted && !slices.Contains(started, c.SegmentID.String()) {
			started = append(started, c.SegmentID.String())
		}
	}
	if len(started) != 2 {
		t.Fatalf("COPY_STARTED under %d ids, want 2 (a restart)", len(started))
	}
	waitFor(t, u, "abandoned segment deleted", func() bool { return len(meta.RemoteSegments(p.TopicID, 0)) == 1 })
	for _, k := range mem.Keys() {
		if strings.Contains(k, started[0]) {
			t.Fatalf("abandoned object %s left", k)
		}
	}
}

// squatter is a MemStore whose .meta keys already hold one byte when a
// create-only put fails: what a foreign object under our key looks like.
type squatter struct{ *objstore.MemStore }

func (s *squatter) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	info, err := s.MemStore.Head(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) && strings.HasSuffix(key, ".meta") {
		return objstore.ObjectInfo{Key: key, Size: 1}, nil
	}
	return info, err
}

// A crash between the puts and COPY_FINISHED (the first uploader stopped
// while a put hangs) leaves a COPY_STARTED segment of this broker. A new
// uploader re-uploads the data under a new id at once, leaves the orphan
// alone within the grace, and deletes it (record and objects) after.
func TestUploaderCrashMidCopyLeavesOrphanDeletedAfterGrace(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 2, 2)
	clock := newFakeNow(testTs + 1_000_000)
	mem := objstore.NewMemStore()
	faults := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpPut, Key: "strata/*/0/*.meta", Latency: time.Hour})
	u1 := newTestUploader(t, faults, meta, clock.Now)
	u1.Lead(tp.LeaderPartition)
	waitFor(t, nil, "copy started and .log put", func() bool {
		segs := meta.RemoteSegments(p.TopicID, 0)
		return len(segs) == 1 && len(mem.Keys()) == 1 // .log
	})
	orphan := meta.RemoteSegments(p.TopicID, 0)[0]
	start := time.Now()
	u1.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v with a hanging put", d)
	}
	if orphan.State != metadata.CopyStarted {
		t.Fatalf("orphan in %s", orphan.State)
	}

	u2 := newTestUploader(t, mem, meta, clock.Now, func(c *UploaderConfig) { c.OrphanGrace = time.Minute })
	u2.Lead(tp.LeaderPartition)
	waitFor(t, u2, "re-uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == 40 })
	checkCoverage(t, meta, p, 0, 39)
	for _, s := range meta.finished(p.TopicID, 0) {
		if s.SegmentID == orphan.SegmentID {
			t.Fatal("the orphan's id was finished")
		}
	}
	settle(t, u2)
	if got := len(meta.RemoteSegments(p.TopicID, 0)); got != 3 {
		t.Fatalf("%d segments within the grace, want 2 finished + the orphan", got)
	}
	orphanLog := FromInfo(p.Topic, orphan).Key("strata", ExtLog)
	if _, err := mem.Head(testCtx(t), orphanLog); err != nil {
		t.Fatalf("orphan's .log gone within the grace: %v", err)
	}

	clock.add(2 * time.Minute)
	waitFor(t, u2, "orphan deleted", func() bool { return len(meta.RemoteSegments(p.TopicID, 0)) == 2 })
	for _, k := range mem.Keys() {
		if strings.Contains(k, orphan.SegmentID.String()) {
			t.Fatalf("orphan object %s left", k)
		}
	}
	waitFor(t, nil, "orphans counter", func() bool { return upMetricValue(t, u2.metrics.orphans) == 1 })
	checkCoverage(t, meta, p, 0, 39)
}

// Close returns promptly while the store hangs or is down, with copies in
// flight; nothing was committed as finished.
func TestUploaderCloseIsBoundedWhileStoreHangs(t *testing.T) {
	for _, mode := range []string{"down", "hang"} {
		t.Run(mode, func(t *testing.T) {
			p, meta, tp := ordersPart(t)
			tp.appendSegments(t, testTs, 1, 1, 1)
			faults := objstore.WithFaults(objstore.NewMemStore())
			if mode == "down" {
				faults.Down()
			} else {
				faults.Add(objstore.Rule{Op: objstore.OpPut, Latency: time.Hour})
			}
			puts := &putCounter{ObjectStore: faults}
			u := newTestUploader(t, puts, meta, nil)
			u.Lead(tp.LeaderPartition)
			waitFor(t, u, "copy started", func() bool { return len(meta.RemoteSegments(p.TopicID, 0)) == 1 })
			// The copy is in flight: a put has reached the store (and
			// hangs, or failed and is being retried).
			waitFor(t, nil, "a put in flight", func() bool { return puts.n.Load() > 0 })
			start := time.Now()
			if err := u.Close(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("Close took %v", d)
			}
			if len(meta.finished(p.TopicID, 0)) != 0 || tp.Log.RemoteUploadedOffset() != -1 {
				t.Fatal("a segment finished while the store was unusable")
			}
		})
	}
}

// On Lead the partition's prefix is listed: segment objects no record
// names (and older than the grace) are deleted; named segments, the
// manifest, and young strays (another broker's record may not have
// reached this image yet) stay.
func TestUploaderLeadDeletesUnnamedObjects(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 1, 1)
	mem := objstore.NewMemStore()
	u := newTestUploader(t, mem, meta, nil)
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == 20 })
	u.Close()
	named := mem.Keys()

	stray := SegmentKey("strata", p.Topic, p.TopicID, 0, 5, uuid.New(), ExtLog)
	other := SegmentKey("strata", p.Topic, p.TopicID, 1, 5, uuid.New(), ExtLog) // another partition's: not ours to judge
	for _, k := range []string{stray, other} {
		if _, err := mem.Put(testCtx(t), k, bytesReader("junk"), 4, objstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Within the grace (the clock is the objects' own): kept.
	u2 := newTestUploader(t, mem, meta, nil)
	u2.Lead(tp.LeaderPartition)
	settle(t, u2)
	if _, err := mem.Head(testCtx(t), stray); err != nil {
		t.Fatalf("young stray deleted: %v", err)
	}
	u2.Close()
	// Past the grace: deleted at Lead.
	later := time.Now().Add(time.Hour)
	u3 := newTestUploader(t, mem, meta, func() time.Time { return later })
	u3.Lead(tp.LeaderPartition)
	waitFor(t, u3, "stray deleted", func() bool {
		_, err := mem.Head(testCtx(t), stray)
		return errors.Is(err, objstore.ErrNotFound)
	})
	for _, k := range append(named, other) {
		if _, err := mem.Head(testCtx(t), k); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
}

// putCounter counts the Put calls that reached the store beneath it.
type putCounter struct {
	objstore.ObjectStore
	n atomic.Int64
}

func (c *putCounter) Put(ctx context.Context, key string, r io.Reader, size int64, o objstore.PutOptions) (objstore.ObjectInfo, error) {
	c.n.Add(1)
	return c.ObjectStore.Put(ctx, key, r, size, o)
}
