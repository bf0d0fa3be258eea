package tiering

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/tiering/objstore"
)

// commitLog records every commit attempt an uploader makes, accepted or
// refused (testMeta.setFailCommit as an observer).
type commitLog struct {
	mu   sync.Mutex
	recs []metadata.RemoteSegmentRecord
}

func (c *commitLog) observe(rec metadata.RemoteSegmentRecord) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, rec)
	return nil
}

// waitTaskStopped waits until u's task of p has ended by itself.
func waitTaskStopped(t *testing.T, u *Uploader, p Partition) {
	t.Helper()
	u.mu.Lock()
	task := u.parts[p]
	u.mu.Unlock()
	if task == nil {
		t.Fatal("no task for the partition")
	}
	select {
	case <-task.done:
	case <-time.After(15 * time.Second):
		t.Fatal("the fenced task did not stop (retrying a refusal forever?)")
	}
}

// A leader deposed mid-copy (a zombie: it still runs its task in the old
// epoch), here while it writes the manifest, after its fence probe; the
// controller refuses its COPY_FINISHED (FENCED_LEADER_EPOCH). The
// uploader must stop the partition's task, not retry, and take back what
// it did: its manifest entry and its objects; its COPY_STARTED record
// stays for the new leader's orphan step.
func TestUploaderFencedAtCopyFinishedStopsAndDiscardsWhatItPut(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 2)
	mem := objstore.NewMemStore()
	gate := &gatedStore{ObjectStore: mem, suffix: "/" + ManifestName, open: make(chan struct{}), reached: make(chan struct{})}
	var log commitLog
	meta.setFailCommit(log.observe)
	u := newTestUploader(t, gate, meta, nil)
	u.Lead(tp.LeaderPartition)
	<-gate.reached
	segs := meta.RemoteSegments(p.TopicID, 0)
	if len(segs) != 1 || segs[0].State != metadata.CopyStarted {
		t.Fatalf("segments %+v, want one COPY_STARTED", segs)
	}
	zombie := segs[0]

	// Broker 2 is elected; broker 1's uploader is not told (no Resign).
	meta.moveLeader(t, p.TopicID, 0, 2)
	close(gate.open)
	waitTaskStopped(t, u, p)

	segs = meta.RemoteSegments(p.TopicID, 0)
	if len(segs) != 1 || segs[0].SegmentID != zombie.SegmentID || segs[0].State != metadata.CopyStarted {
		t.Fatalf("segments after the fence %+v, want the zombie's COPY_STARTED only", segs)
	}
	if tp.Log.RemoteUploadedOffset() > 0 {
		t.Fatalf("local retention may delete up to %d after a refused copy", tp.Log.RemoteUploadedOffset())
	}
	objs, err := mem.List(testCtx(t), PartitionPrefix("strata", p.Topic, p.TopicID, p.Index))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if strings.Contains(o.Key, zombie.SegmentID.String()) {
			t.Errorf("object %s of the fenced copy left in the bucket", o.Key)
		}
	}
	m, _, err := NewManifestStore(mem).Load(testCtx(t), ManifestKey("strata", p.Topic, p.TopicID, p.Index))
	if err != nil {
		t.Fatal(err)
	}
	if m.Find(zombie.SegmentID) >= 0 {
		t.Errorf("the manifest still names the fenced copy: %+v", m.Segments)
	}
	// Stopped for good in this epoch: a Lead in the same epoch keeps the
	// stopped task (no goroutine left to commit anything).
	u.mu.Lock()
	stopped := u.parts[p]
	u.mu.Unlock()
	u.Lead(tp.LeaderPartition)
	u.mu.Lock()
	again := u.parts[p]
	u.mu.Unlock()
	if again != stopped {
		t.Fatal("a Lead in the fenced epoch restarted the partition's task")
	}
	// One refused COPY_FINISHED, not retried.
	refused := 0
	log.mu.Lock()
	for _, r := range log.recs {
		if r.SegmentID == zombie.SegmentID && r.State == metadata.CopyFinished {
			refused++
		}
	}
	log.mu.Unlock()
	if refused != 1 {
		t.Fatalf("%d COPY_FINISHED attempts for the fenced copy, want 1", refused)
	}
}

// A zombie that starts a copy after the election is refused at
// COPY_STARTED: nothing is put, nothing registered, and the task stops;
// when the broker is elected again (a Lead in the newer epoch), it
// uploads again.
func TestUploaderFencedBeforeCopyPutsNothing(t *testing.T) {
	p, meta, tp := ordersPart(t)
	meta.moveLeader(t, p.TopicID, 0, 2) // broker 1 still believes it leads in epoch 3
	tp.appendSegments(t, testTs, 2, 2)
	mem := objstore.NewMemStore()
	u := newTestUploader(t, mem, meta, nil)
	u.Lead(tp.LeaderPartition)
	waitTaskStopped(t, u, p)
	if segs := meta.RemoteSegments(p.TopicID, 0); len(segs) != 0 {
		t.Fatalf("a fenced leader registered %+v", segs)
	}
	if objs, err := mem.List(testCtx(t), "strata/"); err != nil || len(objs) != 0 {
		t.Fatalf("a fenced leader put %v (%v)", objs, err)
	}

	tp.epoch.Store(meta.moveLeader(t, p.TopicID, 0, 1))
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "uploaded once elected again", func() bool { return tp.Log.RemoteUploadedOffset() == 40 })
	if u.Fenced(p) {
		t.Fatal("the new epoch's task reports fenced")
	}
	checkCoverage(t, meta, p, 0, 39)
}

// staleMeta is a broker's metadata view that stops following the
// controller once frozen (a zombie cut off from the metadata stream, or
// paused): reads return the image as it was; commits still reach the
// controller.
type staleMeta struct {
	*testMeta
	mu     sync.Mutex
	frozen map[metadata.TopicPartition][]metadata.RemoteSegmentInfo // nil: live
}

func (s *staleMeta) freeze(p Partition) {
	segs := s.testMeta.RemoteSegments(p.TopicID, p.Index)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = map[metadata.TopicPartition][]metadata.RemoteSegmentInfo{{TopicID: p.TopicID, Partition: p.Index}: segs}
}

func (s *staleMeta) RemoteSegments(id uuid.UUID, p int32) []metadata.RemoteSegmentInfo {
	s.mu.Lock()
	if s.frozen != nil {
		segs := s.frozen[metadata.TopicPartition{TopicID: id, Partition: p}]
		s.mu.Unlock()
		return slices.Clone(segs)
	}
	s.mu.Unlock()
	return s.testMeta.RemoteSegments(id, p)
}

// A zombie whose image is stale: deposed mid-upload, it finishes its puts
// after the new leader has copied the same range and written the
// manifest. Its image still shows its copy COPY_STARTED and none of the
// new leader's segments, so the image check (errSuperseded) lets it
// through; the fence probe (COPY_STARTED again, refused) stops it before
// the manifest, which would otherwise lose the new leader's segments. Its
// objects are deleted, the manifest is the new leader's.
func TestUploaderStaleZombieIsFencedBeforeTheManifest(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 2, 2)
	mem := objstore.NewMemStore()
	gate := &gatedStore{ObjectStore: mem, suffix: "." + ExtMeta, open: make(chan struct{}), reached: make(chan struct{})}
	tp.epoch.Store(meta.moveLeader(t, p.TopicID, 0, 2))
	view := &staleMeta{testMeta: meta}
	old := newTestUploader(t, gate, view, nil, func(c *UploaderConfig) { c.BrokerID = 2 })
	old.Lead(tp.LeaderPartition)
	<-gate.reached
	zombie := meta.RemoteSegments(p.TopicID, 0)
	if len(zombie) != 1 || zombie[0].State != metadata.CopyStarted {
		t.Fatalf("old leader's segments %+v, want one COPY_STARTED", zombie)
	}
	view.freeze(p)

	tp.epoch.Store(meta.moveLeader(t, p.TopicID, 0, 3))
	newer := newTestUploader(t, mem, meta, nil, func(c *UploaderConfig) { c.BrokerID = 3 })
	newer.Lead(tp.LeaderPartition)
	waitFor(t, newer, "the new leader's copies, the old leader's orphan gone", func() bool {
		segs := meta.RemoteSegments(p.TopicID, 0)
		return len(segs) == 2 && segs[0].State == metadata.CopyFinished && segs[1].State == metadata.CopyFinished
	})
	settle(t, newer)

	close(gate.open)
	waitTaskStopped(t, old, p)
	if !old.Fenced(p) {
		t.Fatal("the zombie's task ended but not fenced")
	}
	settle(t, newer)

	var want []string
	for _, s := range meta.RemoteSegments(p.TopicID, 0) {
		if s.State != metadata.CopyFinished || s.BrokerID != 3 {
			t.Fatalf("segment %s [%d, %d] %s by broker %d after the zombie's copy ended", s.SegmentID, s.BaseOffset, s.EndOffset, s.State, s.BrokerID)
		}
		want = append(want, s.SegmentID.String())
	}
	m, _, err := NewManifestStore(mem).Load(testCtx(t), ManifestKey("strata", p.Topic, p.TopicID, p.Index))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range m.Segments {
		got = append(got, s.SegmentID.String())
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("manifest names %v, the controller %v (the zombie's copy %s)", got, want, zombie[0].SegmentID)
	}
	for _, k := range mem.Keys() {
		if strings.Contains(k, zombie[0].SegmentID.String()) {
			t.Errorf("object %s of the zombie's copy left in the bucket", k)
		}
	}
	checkCoverage(t, meta, p, 0, 39)
}
