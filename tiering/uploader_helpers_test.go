package tiering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/tiering/objstore"
)

// testMeta is a Metadata backed by a real metadata.State: every commit is
// planned by State.PlanRemoteSegment and applied with ApplyBatch, exactly
// as the controller does, so an illegal transition is refused as the
// controller refuses it. Deleted topics' names stay known (as the
// controller's TopicNameByID will keep them) unless forget is called.
type testMeta struct {
	mu      sync.Mutex // guards everything below
	st      *metadata.State
	next    int64
	names   map[uuid.UUID]string
	janitor bool
	// failCommit, if set, is consulted before each commit; a non-nil
	// error fails it without planning.
	failCommit func(rec metadata.RemoteSegmentRecord) error
	commits    []metadata.RemoteSegmentRecord // every applied commit
}

func newTestMeta() *testMeta {
	return &testMeta{st: metadata.NewState(), names: map[uuid.UUID]string{}}
}

func (m *testMeta) applyLocked(t testing.TB, recs ...metadata.Record) {
	t.Helper()
	if err := m.st.ApplyBatch(m.next, recs); err != nil {
		t.Fatalf("apply: %v", err)
	}
	m.next++
}

// testLeaderEpoch is the leader epoch of createTopic's partitions, and a
// testPart's (openTestPart): the uploaders of the tests (broker 1) lead
// them in the controller's eyes, which fences remote-segment commits.
const testLeaderEpoch = 3

// createTopic creates a topic with n partitions led by broker 1 in epoch
// testLeaderEpoch.
func (m *testMeta) createTopic(t testing.TB, name string, id uuid.UUID, n int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	recs := []metadata.Record{&metadata.TopicRecord{Name: name, TopicID: id}}
	for p := range n {
		recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: p, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: testLeaderEpoch})
	}
	m.applyLocked(t, recs...)
	m.names[id] = name
}

// moveLeader makes broker leader the leader of partition p of topic id,
// in the next leader epoch, which it returns (the controller's election).
func (m *testMeta) moveLeader(t testing.TB, id uuid.UUID, p, leader int32) int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applyLocked(t, &metadata.PartitionChangeRecord{TopicID: id, Partition: p, Leader: &leader, ISR: []int32{leader}, Replicas: []int32{leader}})
	pi, _ := m.st.Partition(id, p)
	return pi.LeaderEpoch
}

func (m *testMeta) deleteTopic(t testing.TB, id uuid.UUID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	recs, _ := m.st.PlanDeleteTopics(nil, []uuid.UUID{id})
	m.applyLocked(t, recs...)
}

func (m *testMeta) forget(id uuid.UUID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.names, id)
}

func (m *testMeta) setJanitor(on bool) { m.mu.Lock(); m.janitor = on; m.mu.Unlock() }

func (m *testMeta) setFailCommit(f func(metadata.RemoteSegmentRecord) error) {
	m.mu.Lock()
	m.failCommit = f
	m.mu.Unlock()
}

func (m *testMeta) RemoteSegments(id uuid.UUID, p int32) []metadata.RemoteSegmentInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.RemoteSegments(id, p)
}

func (m *testMeta) RemotePartitions() []metadata.TopicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.RemotePartitions()
}

func (m *testMeta) TopicName(id uuid.UUID) (string, bool, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.st.TopicByID(id); ok {
		return t.Name, true, true
	}
	name, ok := m.names[id]
	return name, false, ok
}

func (m *testMeta) TopicConfigs(name string) map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.TopicConfig(name)
}

func (m *testMeta) Janitor() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.janitor }

func (m *testMeta) CommitRemoteSegment(ctx context.Context, rec metadata.RemoteSegmentRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failCommit != nil {
		if err := m.failCommit(rec); err != nil {
			return err
		}
	}
	recs, err := m.st.PlanRemoteSegment(rec)
	if err != nil {
		return err
	}
	if len(recs) > 0 {
		if err := m.st.ApplyBatch(m.next, recs); err != nil {
			return fmt.Errorf("apply planned records: %w", err)
		}
		m.next++
	}
	m.commits = append(m.commits, rec)
	return nil
}

// committed returns every commit applied so far.
func (m *testMeta) committed() []metadata.RemoteSegmentRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]metadata.RemoteSegmentRecord(nil), m.commits...)
}

// finished returns the partition's COPY_FINISHED segments.
func (m *testMeta) finished(id uuid.UUID, p int32) []metadata.RemoteSegmentInfo {
	var out []metadata.RemoteSegmentInfo
	for _, s := range m.RemoteSegments(id, p) {
		if s.State == metadata.CopyFinished {
			out = append(out, s)
		}
	}
	return out
}

// testBatch builds a valid uncompressed v2 batch of n records with values
// of size bytes, record i stamped ts+i, as a producer sends it.
func testBatch(n, size int, ts int64) []byte {
	var raw []byte
	for i := range n {
		r := kmsg.Record{
			OffsetDelta:      int32(i),
			TimestampDelta64: int64(i),
			Key:              fmt.Appendf(nil, "k%d", i),
			Value:            bytes.Repeat([]byte{byte('a' + i%26)}, size),
		}
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1)
		raw = r.AppendTo(raw)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: ts, MaxTimestamp: ts + int64(n-1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: raw,
	}
	rb.Length = int32(len(raw) + batch.HeaderSize - 12)
	b := rb.AppendTo(nil)
	rb.CRC = int32(batch.Checksum(b))
	return rb.AppendTo(b[:0])
}

const testTs = int64(1_764_417_600_000)

// testPart is a led partition for uploader tests: a real storage.Log
// with a settable high watermark and leader epoch.
type testPart struct {
	LeaderPartition
	// Log is the partition's log itself (LeaderPartition.Log is the same
	// log behind tiering's interface): tests append, roll and look at it.
	Log   *storage.Log
	fs    vfs.FS
	hw    atomic.Int64 // -1: follow the log end offset
	epoch atomic.Int32
}

// ordersPart is the common fixture: partition 0 of a one-partition
// topic "orders" known to a fresh test metadata, its log open in a temp
// directory with mods applied to its config.
func ordersPart(t testing.TB, mods ...func(*storage.Config)) (Partition, *testMeta, *testPart) {
	t.Helper()
	p := upPart("orders", 0)
	meta := newTestMeta()
	meta.createTopic(t, p.Topic, p.TopicID, 1)
	return p, meta, openTestPart(t, nil, "", p, mods...)
}

// openTestPart opens an empty remote-storage log of topic/partition on
// fsys (a MemFS if nil) under dir, with Kafka's default config changed by
// mod.
func openTestPart(t testing.TB, fsys vfs.FS, dir string, p Partition, mod ...func(*storage.Config)) *testPart {
	t.Helper()
	if fsys == nil {
		fsys = vfs.NewMem()
	}
	if dir == "" {
		dir = "/data"
	}
	dir = fmt.Sprintf("%s/%s-%d", dir, p.Topic, p.Index)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := storage.DefaultConfig()
	cfg.RemoteStorageEnable = true
	cfg.FileDeleteDelayMs = 1
	cfg.SegmentIndexBytes = 64 << 10 // MemFS allocates the whole preallocated index
	cfg.RetentionMs = -1
	for _, f := range mod {
		f(&cfg)
	}
	var snaps atomic.Int64
	l, err := storage.OpenLog(storage.LogOptions{
		Dir: dir, Topic: p.Topic, Partition: p.Index, FS: fsys, Config: cfg,
		ProducerSnapshot: func(next int64) ([]byte, error) {
			snaps.Add(1)
			return fmt.Appendf(nil, "producer state at %d", next), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	tp := &testPart{fs: fsys}
	tp.hw.Store(-1)
	tp.epoch.Store(testLeaderEpoch)
	tp.Log = l
	tp.LeaderPartition = LeaderPartition{
		Partition: p, Log: l,
		HighWatermark: func() int64 {
			if h := tp.hw.Load(); h >= 0 {
				return h
			}
			return l.LogEndOffset()
		},
		LeaderEpoch: func() int32 { return tp.epoch.Load() },
	}
	return tp
}

// appendSegments appends, for each count in segs, that many batches of
// 10 records (timestamps from ts, one ms per record) and rolls, so each
// count becomes one sealed segment; the active segment is left empty.
func (tp *testPart) appendSegments(t testing.TB, ts int64, segs ...int) int64 {
	t.Helper()
	for _, n := range segs {
		for range n {
			if _, err := tp.Log.Append(testBatch(10, 100, ts), storage.AppendOptions{LeaderEpoch: tp.epoch.Load(), AssignOffsets: true}); err != nil {
				t.Fatal(err)
			}
			ts += 10
		}
		if err := tp.Log.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	return ts
}

// readLocal returns a local file's bytes.
func readLocal(t testing.TB, fsys vfs.FS, path string) []byte {
	t.Helper()
	if path == "" {
		return []byte{}
	}
	f, err := fsys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return b
}

// getObject returns an object's bytes.
func getObject(t testing.TB, store objstore.ObjectStore, key string) []byte {
	t.Helper()
	rc, err := store.Get(context.Background(), key, 0, -1)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newTestUploader builds and starts an uploader over store and meta with
// fast retries and a long interval (tests Kick), closed at cleanup.
func newTestUploader(t testing.TB, store objstore.ObjectStore, meta Metadata, now func() time.Time, mod ...func(*UploaderConfig)) *Uploader {
	t.Helper()
	cfg := UploaderConfig{
		Store: store, Prefix: "strata", Meta: meta, BrokerID: 1, Threads: 2,
		Interval: time.Hour, Registerer: prometheus.NewRegistry(), Now: now,
	}
	for _, f := range mod {
		f(&cfg)
	}
	u, err := NewUploader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u.backoffBase = time.Millisecond
	u.Start()
	t.Cleanup(func() { u.Close() })
	return u
}

// waitFor polls cond, kicking u, until it holds or 15s pass.
func waitFor(t testing.TB, u *Uploader, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, func() bool {
		if cond() {
			return true
		}
		if u != nil {
			u.Kick()
		}
		return false
	}, "%s", what)
}

// settle kicks u and returns once every led partition, and the janitor,
// has completed a pass that began after the call: what the test did
// before settle has been seen, so "nothing changed" after it means the
// uploader chose to do nothing.
func settle(t testing.TB, u *Uploader) {
	t.Helper()
	u.mu.Lock()
	want := map[*partTask]uint64{}
	for _, pt := range u.parts {
		want[pt] = pt.passesStarted.Load()
	}
	u.mu.Unlock()
	// The janitor counts at the end of each loop: one more may be the
	// pass in progress now, two more is one that began after this call.
	janitor := u.janitorPasses.Load() + 2
	u.Kick()
	testutil.Eventually(t, 15*time.Second, func() bool {
		u.Kick()
		for pt, n := range want {
			if pt.passesDone.Load() <= n && pt.ctx.Err() == nil {
				return false
			}
		}
		return u.janitorPasses.Load() >= janitor
	}, "a completed uploader pass")
}

// upMetricValue reads a counter or gauge.
func upMetricValue(t testing.TB, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// fakeNow is a settable clock.
type fakeNow struct{ ms atomic.Int64 }

func newFakeNow(ms int64) *fakeNow { f := &fakeNow{}; f.ms.Store(ms); return f }
func (f *fakeNow) Now() time.Time  { return time.UnixMilli(f.ms.Load()) }
func (f *fakeNow) add(d time.Duration) {
	f.ms.Add(d.Milliseconds())
}

// checkCoverage fails unless every offset in [start, end] of the
// partition is covered by exactly one COPY_FINISHED segment and no
// finished segment lies outside.
func checkCoverage(t testing.TB, meta *testMeta, p Partition, start, end int64) {
	t.Helper()
	fin := meta.finished(p.TopicID, p.Index)
	next := start
	for _, s := range fin {
		if s.BaseOffset != next {
			t.Fatalf("segment [%d, %d]: want base %d (hole or overlap); finished: %v", s.BaseOffset, s.EndOffset, next, spans(fin))
		}
		next = s.EndOffset + 1
	}
	if next != end+1 {
		t.Fatalf("finished segments end at %d, want %d: %v", next-1, end, spans(fin))
	}
}

func spans(segs []metadata.RemoteSegmentInfo) []string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = fmt.Sprintf("[%d,%d]%s", s.BaseOffset, s.EndOffset, s.State)
	}
	return out
}

// getSegmentFile returns one file of an uploaded segment: its .log
// object, or a section of its packed .meta (ReadSegmentFile).
func getSegmentFile(t testing.TB, store objstore.ObjectStore, rs RemoteSegment, ext string) []byte {
	t.Helper()
	if ext == ExtLog {
		return getObject(t, store, rs.Key("strata", ext))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := ReadSegmentFile(ctx, store, "strata", rs, ext)
	if err != nil {
		t.Fatalf("segment %d .%s: %v", rs.BaseOffset, ext, err)
	}
	return b
}

// withoutChunks drops manifest chunk keys (manifest.d/...) from keys:
// how many a manifest has depends on when it was last compacted.
func withoutChunks(keys []string) []string {
	var out []string
	for _, k := range keys {
		if !strings.Contains(k, "/"+manifestChunkDir+"/") {
			out = append(out, k)
		}
	}
	return out
}

func objectKeys(objs []objstore.ObjectInfo) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Key
	}
	return out
}
