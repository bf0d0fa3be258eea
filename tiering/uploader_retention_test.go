package tiering

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/tiering/objstore"
)

// Remote retention by retention.ms then retention.bytes deletes the
// oldest remote segments (records, objects, manifest entries) and moves
// the log start (local segments below go too); with every remote segment
// gone, uploads go on.
func TestUploaderRemoteRetentionByTimeAndBytes(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 2, 2, 2, 2) // [0,19] [20,39] [40,59] [60,79]; max ts +19 +39 +59 +79
	clock := newFakeNow(testTs + 1045)
	store := objstore.NewMemStore()
	u := newTestUploader(t, store, meta, clock.Now)
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == 80 })
	all := meta.finished(p.TopicID, 0)
	segSize := all[0].SizeBytes
	manifest := func() Manifest {
		m, _, err := NewManifestStore(store).Load(testCtx(t), ManifestKey("strata", p.Topic, p.TopicID, 0))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	gone := func(segs ...metadata.RemoteSegmentInfo) {
		t.Helper()
		for _, s := range segs {
			for _, ext := range allSegmentExts {
				if _, err := store.Head(testCtx(t), FromInfo(p.Topic, s).Key("strata", ext)); !errors.Is(err, objstore.ErrNotFound) {
					t.Fatalf("object .%s of deleted [%d,%d]: %v", ext, s.BaseOffset, s.EndOffset, err)
				}
			}
		}
	}

	cfg := tp.Log.Config()
	cfg.RetentionMs = 1000 // now-1000 = +45: [0,19] and [20,39] are older
	tp.Log.SetConfig(cfg)
	// DELETE_FINISHED, the last step, takes segments out of the image.
	waitFor(t, u, "retention.ms", func() bool { return len(meta.RemoteSegments(p.TopicID, 0)) == 2 })
	if tp.Log.LogStartOffset() != 40 || tp.Log.LocalLogStartOffset() != 40 {
		t.Fatalf("log start %d, local start %d; want 40", tp.Log.LogStartOffset(), tp.Log.LocalLogStartOffset())
	}
	gone(all[0], all[1])
	if m := manifest(); len(m.Segments) != 2 || m.LogStartOffset != 40 || m.Segments[0].BaseOffset != 40 {
		t.Fatalf("manifest after retention.ms: %+v", m)
	}

	cfg.RetentionMs = -1
	cfg.RetentionBytes = segSize // remote 2 segments, nothing local above: one must go
	tp.Log.SetConfig(cfg)
	waitFor(t, u, "retention.bytes", func() bool { return len(meta.RemoteSegments(p.TopicID, 0)) == 1 })
	if tp.Log.LogStartOffset() != 60 {
		t.Fatalf("log start %d, want 60", tp.Log.LogStartOffset())
	}
	gone(all[2])
	waitFor(t, nil, "remote deleted counter", func() bool { return upMetricValue(t, u.metrics.remoteDeleted) == 3 })

	cfg.RetentionBytes = 0
	tp.Log.SetConfig(cfg)
	waitFor(t, u, "every remote segment deleted", func() bool { return len(meta.RemoteSegments(p.TopicID, 0)) == 0 })
	gone(all[3])
	if tp.Log.LogStartOffset() != 80 {
		t.Fatalf("log start %d, want 80", tp.Log.LogStartOffset())
	}
	cfg.RetentionBytes = -1
	tp.Log.SetConfig(cfg)
	tp.appendSegments(t, testTs+2000, 1, 1)
	waitFor(t, u, "uploads after all remote data was deleted", func() bool { return tp.Log.RemoteUploadedOffset() == 100 })
	checkCoverage(t, meta, p, 80, 99)
	if m := manifest(); len(m.Segments) != 2 || m.LogStartOffset != 80 {
		t.Fatalf("manifest after new uploads: %+v", m)
	}
}

// When the janitor sees a deleted topic with remote segments, every
// segment goes DELETE_STARTED → DELETE_FINISHED and nothing is left under
// the topic's prefix (manifests and stray objects included); other
// topics are untouched, and a deleted topic whose name is unknown is
// skipped.
func TestUploaderJanitorDeletesDeletedTopics(t *testing.T) {
	meta := newTestMeta()
	store := objstore.NewMemStore()
	u := newTestUploader(t, store, meta, nil)
	ids := map[string]uuid.UUID{
		"gone": uuid.MustParse("11111111-1111-4111-8111-111111111111"),
		"kept": uuid.MustParse("22222222-2222-4222-8222-222222222222"),
		"lost": uuid.MustParse("33333333-3333-4333-8333-333333333333"),
	}
	var parts []Partition
	for _, name := range []string{"gone", "kept", "lost"} {
		meta.createTopic(t, name, ids[name], 2)
		for i := range int32(2) {
			p := Partition{Topic: name, TopicID: ids[name], Index: i}
			tp := openTestPart(t, nil, "", p)
			tp.appendSegments(t, testTs, 1, 1)
			u.Lead(tp.LeaderPartition)
			parts = append(parts, p)
		}
	}
	waitFor(t, u, "uploads", func() bool {
		for _, p := range parts {
			if len(meta.finished(p.TopicID, p.Index)) != 2 {
				return false
			}
		}
		return true
	})
	stray := TopicPrefix("strata", "gone", ids["gone"]) + "0/leftover"
	if _, err := store.Put(testCtx(t), stray, bytes.NewReader([]byte("x")), 1, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if p.Topic != "kept" {
			u.Resign(p)
		}
	}
	meta.deleteTopic(t, ids["gone"])
	meta.deleteTopic(t, ids["lost"])
	meta.forget(ids["lost"])
	settle(t, u)
	if len(meta.RemoteSegments(ids["gone"], 0)) != 2 {
		t.Fatal("a broker that is not the janitor deleted a topic's remote data")
	}
	meta.setJanitor(true)
	waitFor(t, u, "deleted topic cleaned", func() bool {
		return len(meta.RemoteSegments(ids["gone"], 0))+len(meta.RemoteSegments(ids["gone"], 1)) == 0
	})
	waitFor(t, u, "prefix empty", func() bool {
		objs, err := store.List(testCtx(t), TopicPrefix("strata", "gone", ids["gone"]))
		return err == nil && len(objs) == 0
	})
	var deleteStarted, deleteFinished int
	for _, c := range meta.committed() {
		if c.TopicID == ids["gone"] {
			switch c.State {
			case metadata.DeleteStarted:
				deleteStarted++
			case metadata.DeleteFinished:
				deleteFinished++
			}
		}
	}
	if deleteStarted != 4 || deleteFinished != 4 {
		t.Fatalf("DELETE_STARTED %d, DELETE_FINISHED %d; want 4 each", deleteStarted, deleteFinished)
	}
	for _, name := range []string{"kept", "lost"} {
		objs, _ := store.List(testCtx(t), TopicPrefix("strata", name, ids[name]))
		if n := len(withoutChunks(objectKeys(objs))); n != 2*(2*len(PackedSegmentExts)+1) {
			t.Fatalf("topic %s has %d objects left, want %d", name, n, 2*(2*len(PackedSegmentExts)+1))
		}
		if len(meta.finished(ids[name], 0)) != 2 {
			t.Fatalf("topic %s lost remote segments", name)
		}
	}
}

// A leader whose local log is empty (a lost disk) restarts it after the
// remote tier: the log start is the remote start, appends continue after
// the remote end.
func TestUploaderLeadRestartsEmptyLogAfterRemoteTier(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 1, 2, 1)
	store := objstore.NewMemStore()
	u := newTestUploader(t, store, meta, nil)
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == 40 })
	u.Resign(p)

	fresh := openTestPart(t, nil, "/other", p)
	u.Lead(fresh.LeaderPartition)
	l := fresh.Log
	if l.LogStartOffset() != 0 || l.LocalLogStartOffset() != 40 || l.LogEndOffset() != 40 || l.RemoteUploadedOffset() != 40 {
		t.Fatalf("after Lead: log start %d, local start %d, end %d, uploaded %d; want 0, 40, 40, 40",
			l.LogStartOffset(), l.LocalLogStartOffset(), l.LogEndOffset(), l.RemoteUploadedOffset())
	}
	info, err := l.Append(testBatch(10, 10, testTs+5000), storage.AppendOptions{LeaderEpoch: 4, AssignOffsets: true})
	if err != nil || info.FirstOffset != 40 {
		t.Fatalf("append after restart: %+v, %v", info, err)
	}
	st, ok := u.Status(p)
	if !ok || st.LogStart != 0 || st.RemoteEnd != 39 || st.LocalStart != 40 {
		t.Fatalf("status %+v", st)
	}

	// A non-empty log whose local start is above the remote start gets
	// its log start lowered to the remote start.
	u.Resign(p)
	trimmed := openTestPart(t, nil, "/third", p)
	trimmed.appendSegments(t, testTs, 1, 2, 1)
	if err := trimmed.Log.SetLogStartOffset(10); err != nil {
		t.Fatal(err)
	}
	u.Lead(trimmed.LeaderPartition)
	if trimmed.Log.LogStartOffset() != 0 {
		t.Fatalf("log start %d, want the remote start 0", trimmed.Log.LogStartOffset())
	}
}

// After a leader change with another segmentation, a segment straddling
// the remote end goes up whole with its true base; one covering remote
// segments wholly replaces them (they are deleted as redundant). The
// manifest stays valid and serves each offset from one segment.
func TestUploaderNewLeaderSegmentationOverlap(t *testing.T) {
	p := upPart("orders", 0)
	meta := newTestMeta()
	meta.createTopic(t, p.Topic, p.TopicID, 1)
	store := objstore.NewMemStore()
	u := newTestUploader(t, store, meta, nil)
	old := openTestPart(t, nil, "", p)
	old.appendSegments(t, testTs, 3, 3) // [0,29] [30,59]
	u.Lead(old.LeaderPartition)
	waitFor(t, u, "old leader's uploads", func() bool { return old.Log.RemoteUploadedOffset() == 60 })
	u.Resign(p)

	straddler := openTestPart(t, nil, "/b", p)
	straddler.appendSegments(t, testTs, 4, 5) // [0,39] [40,89]
	u.Lead(straddler.LeaderPartition)
	waitFor(t, u, "straddling segment", func() bool { return straddler.Log.RemoteUploadedOffset() == 90 })
	if got := strings.Join(spans(meta.finished(p.TopicID, 0)), " "); got != "[0,29]COPY_FINISHED [30,59]COPY_FINISHED [40,89]COPY_FINISHED" {
		t.Fatalf("finished: %s", got)
	}
	ms := NewManifestStore(store)
	m, _, err := ms.Load(testCtx(t), ManifestKey("strata", p.Topic, p.TopicID, 0))
	if err != nil || len(m.Segments) != 3 {
		t.Fatalf("manifest %+v, %v", m, err)
	}
	if s, ok := m.Readable(45); !ok || s.BaseOffset != 40 {
		t.Fatalf("Readable(45) = %+v, %v", s, ok)
	}
	u.Resign(p)

	coverer := openTestPart(t, nil, "/c", p)
	coverer.appendSegments(t, testTs, 12) // [0,119]: covers everything remote
	u.Lead(coverer.LeaderPartition)
	waitFor(t, u, "covering segment, redundant ones deleted", func() bool {
		return strings.Join(spans(meta.RemoteSegments(p.TopicID, 0)), " ") == "[0,119]COPY_FINISHED"
	})
	m, _, err = ms.Load(testCtx(t), ManifestKey("strata", p.Topic, p.TopicID, 0))
	if err != nil || len(m.Segments) != 1 || m.Segments[0].EndOffset != 119 {
		t.Fatalf("manifest %+v, %v", m, err)
	}
	if n := len(withoutChunks(store.Keys())); n != len(PackedSegmentExts)+1 {
		t.Fatalf("%d objects left, want one segment's %d and the manifest", n, len(PackedSegmentExts))
	}
}

// A retention deletion interrupted after DELETE_STARTED (the store
// refuses deletes, then the uploader stops) is resumed by the next
// leader: objects, manifest entry and record all go, and the manifest's
// log start catches up with the log's.
func TestUploaderResumesInterruptedRemoteDeletion(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 1, 1, 1)
	mem := objstore.NewMemStore()
	faults := objstore.WithFaults(mem)
	u := newTestUploader(t, faults, meta, nil)
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == 30 })
	faults.Add(objstore.Rule{Op: objstore.OpDelete, Err: objstore.ErrInjected})
	cfg := tp.Log.Config()
	cfg.RetentionBytes = 2 * meta.finished(p.TopicID, 0)[0].SizeBytes // one of three must go
	tp.Log.SetConfig(cfg)
	// The log start moves once DELETE_STARTED is committed, deletes or not.
	waitFor(t, u, "DELETE_STARTED and the log start at 10", func() bool {
		return len(meta.finished(p.TopicID, 0)) == 2 && tp.Log.LogStartOffset() == 10
	})
	u.Close()
	if segs := meta.RemoteSegments(p.TopicID, 0); len(segs) != 3 || segs[0].State != metadata.DeleteStarted {
		t.Fatalf("segments after the interrupted delete: %v", spans(segs))
	}
	victim := meta.RemoteSegments(p.TopicID, 0)[0]

	u2 := newTestUploader(t, mem, meta, nil)
	u2.Lead(tp.LeaderPartition)
	waitFor(t, u2, "deletion resumed", func() bool { return len(meta.RemoteSegments(p.TopicID, 0)) == 2 })
	for _, ext := range allSegmentExts {
		if _, err := mem.Head(testCtx(t), FromInfo(p.Topic, victim).Key("strata", ext)); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf(".%s of the deleted segment: %v", ext, err)
		}
	}
	m, _, err := NewManifestStore(mem).Load(testCtx(t), ManifestKey("strata", p.Topic, p.TopicID, 0))
	if err != nil || len(m.Segments) != 2 || m.LogStartOffset != 10 {
		t.Fatalf("manifest %+v, %v", m, err)
	}
}

// DeleteRecords moves the log start; remote segments wholly below it are
// deleted from the bucket (the one holding the new start stays).
func TestUploaderDeletesRemoteSegmentsBelowLogStart(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 2, 2, 2, 2) // [0,19] [20,39] [40,59] [60,79]
	store := objstore.NewMemStore()
	u := newTestUploader(t, store, meta, newFakeNow(testTs+100).Now)
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == 80 })
	all := meta.finished(p.TopicID, 0)
	if err := tp.Log.SetLogStartOffset(45); err != nil {
		t.Fatal(err)
	}
	waitFor(t, u, "segments below the log start deleted", func() bool { return len(meta.RemoteSegments(p.TopicID, 0)) == 2 })
	left := meta.finished(p.TopicID, 0)
	if left[0].BaseOffset != 40 || tp.Log.LogStartOffset() != 45 {
		t.Fatalf("remote segments left start at %d (want 40), log start %d (want 45)", left[0].BaseOffset, tp.Log.LogStartOffset())
	}
	for _, s := range all[:2] {
		if _, err := store.Head(testCtx(t), FromInfo(p.Topic, s).Key("strata", ExtLog)); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("object of [%d,%d] below the log start: %v", s.BaseOffset, s.EndOffset, err)
		}
	}
}
