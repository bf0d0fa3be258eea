package tiering

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/tiering/objstore"
)

var upTopicID = uuid.MustParse("3f2504e0-4f89-41d3-9a0c-0305e82c3301")

func upPart(topic string, idx int32) Partition {
	return Partition{Topic: topic, TopicID: upTopicID, Index: idx}
}

// Sealed segments wholly below the HW go up, in order, each as five
// objects whose bytes equal the local files, named in the manifest and
// committed COPY_FINISHED; the segment holding the HW and the active one
// do not. Raising the HW uploads the next.
func TestUploaderUploadsSealedCommittedSegments(t *testing.T) {
	p := upPart("orders-eu", 0)
	meta := newTestMeta()
	meta.createTopic(t, p.Topic, p.TopicID, 1)
	tp := openTestPart(t, nil, "", p)
	tp.appendSegments(t, testTs, 3, 3, 3) // [0,29] [30,59] [60,89]
	tp.appendSegments(t, testTs+1000, 1)  // [90,99], then an empty active segment
	if _, err := tp.Log.Append(testBatch(10, 100, testTs+2000), storage.AppendOptions{LeaderEpoch: 3, AssignOffsets: true}); err != nil {
		t.Fatal(err)
	}
	tp.hw.Store(75) // inside [60,89]
	store := objstore.NewMemStore()
	u := newTestUploader(t, store, meta, nil)
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "two segments uploaded", func() bool { return len(meta.finished(p.TopicID, 0)) == 2 })
	settle(t, u)
	fin := meta.finished(p.TopicID, 0)
	if got := spans(fin); !slices.Equal(got, []string{"[0,29]COPY_FINISHED", "[30,59]COPY_FINISHED"}) {
		t.Fatalf("finished = %v, want [0,29] [30,59] only (HW 75)", got)
	}
	if got := tp.Log.RemoteUploadedOffset(); got != 60 {
		t.Fatalf("RemoteUploadedOffset = %d, want 60", got)
	}
	st, ok := u.Status(p)
	if !ok || st.RemoteStart != 0 || st.RemoteEnd != 59 || st.RemoteSegments != 2 || st.UploadLagSegments != 0 {
		t.Fatalf("status = %+v", st)
	}

	local := tp.Log.Segments()
	m, _, err := NewManifestStore(store).Load(testCtx(t), ManifestKey("strata", p.Topic, p.TopicID, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Segments) != 2 || m.LogStartOffset != 0 {
		t.Fatalf("manifest = %+v", m)
	}
	var keys []string
	for i, s := range fin {
		ms := m.Segments[i]
		if ms.SegmentID != s.SegmentID || ms.BaseOffset != s.BaseOffset || ms.EndOffset != s.EndOffset ||
			ms.State != StateCopyFinished || ms.SizeBytes != local[i].Size || ms.MaxTimestamp != local[i].MaxTimestamp {
			t.Fatalf("manifest segment %d = %+v, metadata %+v, local %+v", i, ms, s, local[i])
		}
		if s.BrokerID != 1 || s.SizeBytes != local[i].Size || len(s.LeaderEpochs) != 1 || s.LeaderEpochs[0] != (metadata.EpochStart{Epoch: 3, StartOffset: s.BaseOffset}) {
			t.Fatalf("metadata segment %d = %+v", i, s)
		}
		rs := FromInfo(p.Topic, s)
		want := map[string][]byte{
			ExtLog:       readLocal(t, tp.fs, local[i].LogPath),
			ExtIndex:     readLocal(t, tp.fs, local[i].IndexPath),
			ExtTimeIndex: readLocal(t, tp.fs, local[i].TimeIndexPath),
			ExtSnapshot:  readLocal(t, tp.fs, local[i+1].SnapshotPath),
		}
		// The log keeps only its latest producer snapshots; an older
		// segment's end snapshot is gone and goes up as a zero-byte object.
		for ext, w := range want {
			if got := getSegmentFile(t, store, rs, ext); !bytes.Equal(got, w) {
				t.Fatalf("segment %d .%s: %d bytes differ from the local %d", i, ext, len(got), len(w))
			}
			if sz, _ := ms.Files.Size(ext); sz != int64(len(w)) {
				t.Fatalf("manifest .%s size %d, want %d", ext, sz, len(w))
			}
		}
		eps, err := DecodeEpochs(getSegmentFile(t, store, rs, ExtEpochs))
		if err != nil || !slices.Equal(eps, ms.LeaderEpochs) {
			t.Fatalf(".epochs = %v, %v; want %v", eps, err, ms.LeaderEpochs)
		}
		for _, ext := range PackedSegmentExts {
			keys = append(keys, rs.Key("strata", ext))
		}
	}
	keys = append(keys, ManifestKey("strata", p.Topic, p.TopicID, 0))
	slices.Sort(keys)
	if got := withoutChunks(store.Keys()); !slices.Equal(got, keys) {
		t.Fatalf("bucket keys:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(keys, "\n"))
	}
	for _, c := range store.Calls() {
		if c.Op == objstore.OpPut && strings.HasSuffix(c.Key, ".log") && c.Mode != objstore.CreateOnly {
			t.Fatalf("segment object put with mode %v", c.Mode)
		}
	}

	tp.hw.Store(-1) // HW = LEO: [60,89] and [90,99] are committed now; the active one never goes
	waitFor(t, u, "all sealed segments uploaded", func() bool { return len(meta.finished(p.TopicID, 0)) == 4 })
	if got := tp.Log.RemoteUploadedOffset(); got != 100 {
		t.Fatalf("RemoteUploadedOffset = %d, want 100", got)
	}
	checkCoverage(t, meta, p, 0, 99)
	local = tp.Log.Segments()
	withSnap := 0
	for i, s := range meta.finished(p.TopicID, 0)[2:] {
		want := readLocal(t, tp.fs, local[i+3].SnapshotPath)
		got := getSegmentFile(t, store, FromInfo(p.Topic, s), ExtSnapshot)
		if !bytes.Equal(got, want) {
			t.Fatalf("segment [%d,%d] snapshot object %q, want %q", s.BaseOffset, s.EndOffset, got, want)
		}
		if len(want) > 0 {
			withSnap++
		}
	}
	if withSnap != 2 {
		t.Fatalf("%d of the 2 newest uploads carried the next segment's producer snapshot", withSnap)
	}
	waitFor(t, nil, "uploaded segments counter", func() bool { return upMetricValue(t, u.metrics.uploadedSegments) == 4 })
}

// Lead is idempotent for the same log and leader epoch; a new epoch
// replaces the task (the old one stops first) and uploading goes on.
func TestUploaderLeadIsIdempotentAndNewEpochReplaces(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 1)
	u := newTestUploader(t, objstore.NewMemStore(), meta, nil)
	u.Lead(tp.LeaderPartition)
	first := u.parts[p]
	u.Lead(tp.LeaderPartition)
	if u.parts[p] != first {
		t.Fatal("a repeated Lead replaced the task")
	}
	waitFor(t, u, "uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == 10 })
	tp.epoch.Store(meta.moveLeader(t, p.TopicID, 0, 1)) // epoch 4
	u.Lead(tp.LeaderPartition)
	if u.parts[p] == first {
		t.Fatal("a new leader epoch kept the old task")
	}
	select {
	case <-first.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the replaced task did not stop")
	}
	tp.appendSegments(t, testTs+100, 1)
	waitFor(t, u, "uploaded under the new epoch", func() bool { return tp.Log.RemoteUploadedOffset() == 20 })
	fin := meta.finished(p.TopicID, 0)
	if got := fin[1].LeaderEpochs; len(got) != 1 || got[0].Epoch != 4 {
		t.Fatalf("second segment's epochs %v", got)
	}
	checkCoverage(t, meta, p, 0, 19)
}

// A sealed segment deleted locally by retention.ms before its upload
// (now below the log start) is skipped, not an error, and nothing is
// committed for it.
func TestUploaderSkipsSegmentDeletedByRetentionBeforeUpload(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 1, 1, 1)
	u := newTestUploader(t, objstore.NewMemStore(), meta, nil)
	stale := tp.Log.Segments()
	if err := tp.Log.SetLogStartOffset(20); err != nil {
		t.Fatal(err)
	}
	waitFor(t, nil, "files removed", func() bool {
		_, err := tp.fs.Stat(stale[0].LogPath)
		return err != nil
	})
	err := u.copySegment(testCtx(t), tp.LeaderPartition, stale[0], testLeaderEpoch)
	if !errors.Is(err, errSegmentVanished) {
		t.Fatalf("copy of a deleted segment: %v", err)
	}
	if len(meta.committed()) != 0 {
		t.Fatal("a record was committed for a vanished segment")
	}
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "the rest uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == 30 })
	checkCoverage(t, meta, p, 20, 29)
}

// The same copy on the OS file system into the fs backend: objects equal
// the files.
func TestUploaderOSFilesIntoFSStore(t *testing.T) {
	p := upPart("orders", 0)
	meta := newTestMeta()
	meta.createTopic(t, p.Topic, p.TopicID, 1)
	tp := openTestPart(t, vfs.Default, t.TempDir(), p)
	tp.appendSegments(t, testTs, 2, 3)
	store, err := objstore.NewFSStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	u := newTestUploader(t, store, meta, nil)
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == 50 })
	local := tp.Log.Segments()
	for i, s := range meta.finished(p.TopicID, 0) {
		rs := FromInfo(p.Topic, s)
		for ext, path := range map[string]string{ExtLog: local[i].LogPath, ExtIndex: local[i].IndexPath, ExtTimeIndex: local[i].TimeIndexPath} {
			if !bytes.Equal(getSegmentFile(t, store, rs, ext), readLocal(t, tp.fs, path)) {
				t.Fatalf("segment %d .%s differs from %s", i, ext, path)
			}
		}
	}
}

// DecodeEpochs reads what encodeEpochs writes and refuses anything else
// with an error, never a panic.
func TestEpochsObjectRoundTripAndBadInput(t *testing.T) {
	es := []metadata.EpochStart{{Epoch: 3, StartOffset: 100}, {Epoch: 5, StartOffset: 150}}
	got, err := DecodeEpochs(encodeEpochs(es))
	if err != nil || !slices.Equal(got, []EpochEntry{{3, 100}, {5, 150}}) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	if got, err := DecodeEpochs(encodeEpochs(nil)); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n", "0\n2\n1 1\n", "0\n1\n1\n", "0\n1\nx 1\n", "0\n1\n-1 0\n",
		"0\n2\n5 1\n3 2\n", "0\n2\n3 9\n5 2\n", "0\n-1\n", "0\n1\n1 99999999999999999999\n"} {
		if _, err := DecodeEpochs([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// The manifest carries the topic's own configs, so a restore from the
// bucket alone recreates the topic as it was.
func TestUploaderManifestKeepsTopicConfigs(t *testing.T) {
	p := upPart("orders", 0)
	meta := newTestMeta()
	meta.createTopic(t, p.Topic, p.TopicID, 1)
	v := "123456"
	meta.mu.Lock()
	meta.applyLocked(t, &metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: p.Topic, Name: "retention.ms", Value: &v})
	meta.mu.Unlock()
	tp := openTestPart(t, nil, "", p)
	tp.appendSegments(t, testTs, 2, 2)
	store := objstore.NewMemStore()
	u := newTestUploader(t, store, meta, newFakeNow(testTs).Now)
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "uploaded", func() bool { return tp.Log.RemoteUploadedOffset() == 40 })
	m, _, err := NewManifestStore(store).Load(testCtx(t), ManifestKey("strata", p.Topic, p.TopicID, 0))
	if err != nil {
		t.Fatal(err)
	}
	if m.Configs["retention.ms"] != v || len(m.Configs) != 1 {
		t.Fatalf("manifest configs %v, want retention.ms=%s", m.Configs, v)
	}
}

// Passes counts completed passes: one at Lead, one more per Kick, none
// while the uploader is idle between them.
func TestUploaderPassesCountsCompletedPasses(t *testing.T) {
	_, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 1, 1)
	u := newTestUploader(t, objstore.NewMemStore(), meta, nil)
	if got := u.Passes(); got != 0 {
		t.Fatalf("Passes = %d before any Lead", got)
	}
	u.Lead(tp.LeaderPartition)
	waitFor(t, nil, "the first pass", func() bool { return u.Passes() >= 1 })
	settle(t, u)
	after := u.Passes()
	if after < 2 {
		t.Fatalf("Passes = %d after Lead and a settled Kick, want at least 2", after)
	}
	u.Kick()
	waitFor(t, nil, "the kicked pass", func() bool { return u.Passes() > after })
}
