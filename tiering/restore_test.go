package tiering

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/tiering/objstore"
)

// restoreBucket uploads topic (2 partitions, 4 segments each) and a
// topic whose name extends it ("orders-eu") into one bucket, and an older
// incarnation of topic (another id, manifests updated earlier).
func restoreBucket(t *testing.T) (*objstore.MemStore, *testMeta, uuid.UUID) {
	t.Helper()
	meta := newTestMeta()
	store := objstore.NewMemStore()
	clock := newFakeNow(testTs + 10_000_000)
	u := newTestUploader(t, store, meta, clock.Now)
	ordersID := uuid.MustParse("44444444-4444-4444-8444-444444444444")
	oldID := uuid.MustParse("55555555-5555-4555-8555-555555555555")
	euID := uuid.MustParse("66666666-6666-4666-8666-666666666666")
	var tps []*testPart
	for _, tc := range []struct {
		name string
		id   uuid.UUID
	}{{"orders", oldID}, {"orders", ordersID}, {"orders-eu", euID}} {
		if tc.id != oldID {
			meta.createTopic(t, tc.name, tc.id, 2)
		} else {
			meta.createTopic(t, "orders-old", tc.id, 2) // same topic name, earlier incarnation: keys say "orders"
		}
		for i := range int32(2) {
			tp := openTestPart(t, nil, "/"+tc.id.String(), Partition{Topic: tc.name, TopicID: tc.id, Index: i})
			tp.appendSegments(t, testTs, 1, 2, 1, 1)
			u.Lead(tp.LeaderPartition)
			tps = append(tps, tp)
		}
		waitFor(t, u, "uploads", func() bool {
			for _, tp := range tps {
				if tp.Log.RemoteUploadedOffset() != 50 {
					return false
				}
			}
			return true
		})
		clock.add(time.Hour) // the next incarnation's manifests are newer
	}
	return store, meta, ordersID
}

// FindTopicManifests picks the newest incarnation of exactly the named
// topic, and its manifests name every uploaded segment; RestoreRecords
// re-registers them in a fresh controller image through the real planner.
func TestFindTopicManifestsAndRestoreRecords(t *testing.T) {
	store, meta, ordersID := restoreBucket(t)
	id, mans, err := FindTopicManifests(testCtx(t), store, "/strata/", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if id != ordersID || len(mans) != 2 {
		t.Fatalf("found %s with %d manifests; want %s with 2", id, len(mans), ordersID)
	}
	for i, m := range mans {
		if m.Partition != int32(i) || m.Topic != "orders" || m.TopicID != ordersID {
			t.Fatalf("manifest %d: %s-%s/%d", i, m.Topic, m.TopicID, m.Partition)
		}
		fin := meta.finished(ordersID, int32(i))
		if len(m.Segments) != len(fin) {
			t.Fatalf("partition %d: %d segments, %d finished", i, len(m.Segments), len(fin))
		}
		for j, s := range m.Segments {
			if s.SegmentID != fin[j].SegmentID || s.BaseOffset != fin[j].BaseOffset || s.EndOffset != fin[j].EndOffset {
				t.Fatalf("partition %d segment %d: %+v vs %+v", i, j, s, fin[j])
			}
		}
	}
	if _, _, err := FindTopicManifests(testCtx(t), store, "strata", "order"); !errors.Is(err, ErrTopicNotInBucket) {
		t.Fatalf("a prefix of a topic name matched: %v", err)
	}
	if _, _, err := FindTopicManifests(testCtx(t), store, "strata", "bad/name"); err == nil {
		t.Fatal("an illegal topic name was accepted")
	}
	if eid, emans, err := FindTopicManifests(testCtx(t), store, "strata", "orders-eu"); err != nil || len(emans) != 2 || eid == ordersID {
		t.Fatalf("orders-eu: %s, %d, %v", eid, len(emans), err)
	}

	fresh := newTestMeta()
	fresh.createTopic(t, "orders", ordersID, 2)
	for _, m := range mans {
		recs := RestoreRecords(m, 7, testTs)
		if len(recs) != 2*len(m.Segments) {
			t.Fatalf("%d records for %d segments", len(recs), len(m.Segments))
		}
		for _, r := range recs {
			if err := fresh.CommitRemoteSegment(testCtx(t), r); err != nil {
				t.Fatalf("controller refused %+v: %v", r, err)
			}
		}
		got := fresh.finished(ordersID, m.Partition)
		want := meta.finished(ordersID, m.Partition)
		if len(got) != len(want) {
			t.Fatalf("restored %d segments, want %d", len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.SegmentID != w.SegmentID || g.BaseOffset != w.BaseOffset || g.EndOffset != w.EndOffset ||
				g.SizeBytes != w.SizeBytes || g.MaxTimestamp != w.MaxTimestamp || !slices.Equal(g.LeaderEpochs, w.LeaderEpochs) || g.BrokerID != 7 {
				t.Fatalf("restored %+v, want %+v", g, w)
			}
		}
	}
}

// A missing or wrong-sized object drops its segment; a leading one only
// raises the start, one after a present segment ends the partition there
// (no hole is ever restored) and is reported with everything after it.
func TestFindTopicManifestsNeverRestoresAHole(t *testing.T) {
	store, _, ordersID := restoreBucket(t)
	_, mans, err := FindTopicManifests(testCtx(t), store, "strata", "orders")
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := mans[0], mans[1]
	// Partition 0: the third segment's .meta is gone → keep 2, drop 2.
	if err := store.Delete(testCtx(t), p0.SegmentKey("strata", &p0.Segments[2], ExtMeta)); err != nil {
		t.Fatal(err)
	}
	// Partition 1: the first segment's .log has the wrong size → start at
	// the second.
	if err := store.Delete(testCtx(t), p1.SegmentKey("strata", &p1.Segments[0], ExtLog)); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(testCtx(t), p1.SegmentKey("strata", &p1.Segments[0], ExtLog), bytesReader("short"), 5, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	id, got, err := FindTopicManifests(testCtx(t), store, "strata", "orders")
	var me *MissingSegmentsError
	if !errors.As(err, &me) || !errors.Is(err, ErrMissingSegments) || id != ordersID {
		t.Fatalf("err %v, id %s", err, id)
	}
	if len(me.Missing) != 3 {
		t.Fatalf("missing %+v, want 3 (two after the hole in p0, the first of p1)", me.Missing)
	}
	if len(got[0].Segments) != 2 || got[0].Segments[1].EndOffset != p0.Segments[1].EndOffset {
		t.Fatalf("partition 0 kept %d segments", len(got[0].Segments))
	}
	if len(got[1].Segments) != 3 || got[1].LogStartOffset != p1.Segments[1].BaseOffset {
		t.Fatalf("partition 1 kept %d segments from %d", len(got[1].Segments), got[1].LogStartOffset)
	}
	for _, m := range got {
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

func bytesReader(s string) *bytes.Reader { return bytes.NewReader([]byte(s)) }

// A bucket written before issue 20 (a version 1 manifest, six objects per
// segment, no .txnindex) restores; a missing .index is still noticed.
func TestFindTopicManifestsReadsTheOldLayout(t *testing.T) {
	ctx := testCtx(t)
	store := objstore.NewMemStore()
	m := testManifest(0, 100)
	m.Version = 1
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, n int64) {
		t.Helper()
		if _, err := store.Put(ctx, key, bytes.NewReader(make([]byte, n)), n, objstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Put(ctx, ManifestKey("strata", m.Topic, m.TopicID, m.Partition), bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range m.Segments {
		for _, ext := range SegmentExts[:5] {
			n, _ := m.Segments[i].Files.Size(ext)
			put(m.SegmentKey("strata", &m.Segments[i], ext), n)
		}
	}
	_, mans, err := FindTopicManifests(ctx, store, "strata", m.Topic)
	if err != nil || len(mans) != 1 || len(mans[0].Segments) != 2 {
		t.Fatalf("FindTopicManifests = %+v, %v", mans, err)
	}
	if err := store.Delete(ctx, m.SegmentKey("strata", &m.Segments[1], ExtIndex)); err != nil {
		t.Fatal(err)
	}
	var miss *MissingSegmentsError
	if _, mans, err = FindTopicManifests(ctx, store, "strata", m.Topic); !errors.As(err, &miss) || len(mans[0].Segments) != 1 || miss.Missing[0].Why != "no .index object" {
		t.Fatalf("with a .index gone: %+v, %v", mans, err)
	}
}
