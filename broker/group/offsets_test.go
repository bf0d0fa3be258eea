package group

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
)

// memLog is a fake __consumer_offsets: batches appended per partition, and
// an injectable append failure.
type memLog struct {
	mu      sync.Mutex
	batches map[int32][][]byte
	next    map[int32]int64 // next offset per partition
	fail    error
	// failAfter fails appends after the batch is in the log (a lost
	// leadership or a replication timeout).
	failAfter error
}

func (m *memLog) append(_ context.Context, p int32, b []byte, appended func(int64)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	h, err := batch.Validate(b, batch.Limits{MaxBatchBytes: 1 << 20, TimestampBeforeMaxMs: -1, TimestampAfterMaxMs: -1})
	if err != nil {
		return err
	}
	if m.batches == nil {
		m.batches = map[int32][][]byte{}
		m.next = map[int32]int64{}
	}
	// Assign offsets, as the log does.
	c := append([]byte(nil), b...)
	base := m.next[p]
	binary.BigEndian.PutUint64(c, uint64(base))
	m.next[p] += int64(h.LastOffsetDelta) + 1
	m.batches[p] = append(m.batches[p], c)
	appended(base)
	if m.failAfter != nil {
		return m.failAfter
	}
	return nil
}

// reload replays partition p's batches into a new store, as a restarted
// broker does.
func (m *memLog) reload(t *testing.T, p int32, clock func() time.Time) (*Store, []GroupSnapshot) {
	t.Helper()
	s := NewStore(StoreOptions{Append: m.append, Now: clock})
	l := NewLoader(s, p)
	m.mu.Lock()
	for _, b := range m.batches[p] {
		if err := l.Batch(b); err != nil {
			t.Fatal(err)
		}
	}
	m.mu.Unlock()
	var gs []GroupSnapshot
	l.Finish(func(_ int32, g GroupSnapshot) { gs = append(gs, g) })
	return s, gs
}

func off(o int64, commitMs int64) Offset {
	return Offset{Offset: o, LeaderEpoch: 3, Metadata: "m", CommitTimestamp: commitMs, ExpireTimestamp: -1}
}

func TestStoreCommitSurvivesReload(t *testing.T) {
	ml := &memLog{}
	clock := func() time.Time { return time.UnixMilli(1_000) }
	s := NewStore(StoreOptions{Append: ml.append, Now: clock})
	ctx := context.Background()
	if err := s.Commit(ctx, 7, "g", []Commit{{TopicPartition{"t", 0}, off(10, 1000)}, {TopicPartition{"t", 1}, off(20, 1000)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, 7, "g", []Commit{{TopicPartition{"t", 0}, off(15, 1000)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteOffsets(ctx, 7, "g", []TopicPartition{{"t", 1}, {"t", 9}}); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.Fetch("g", TopicPartition{"t", 0}); !ok || got.Offset != 15 {
		t.Fatalf("fetch t/0 = %+v %v", got, ok)
	}
	r, _ := ml.reload(t, 7, clock)
	if !reflect.DeepEqual(r.FetchAll("g"), s.FetchAll("g")) {
		t.Fatalf("reloaded %+v, had %+v", r.FetchAll("g"), s.FetchAll("g"))
	}
	if _, ok := r.Fetch("g", TopicPartition{"t", 1}); ok {
		t.Fatal("deleted offset came back after reload")
	}
}

func TestStoreCommitNotVisibleWhenAppendFails(t *testing.T) {
	ml := &memLog{fail: kerr.NotCoordinator}
	s := NewStore(StoreOptions{Append: ml.append})
	err := s.Commit(context.Background(), 0, "g", []Commit{{TopicPartition{"t", 0}, off(1, 0)}})
	if !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("err %v", err)
	}
	if _, ok := s.Fetch("g", TopicPartition{"t", 0}); ok {
		t.Fatal("an offset whose append failed is visible")
	}
}

func TestStoreGroupMetadataAndDeleteGroupReload(t *testing.T) {
	ml := &memLog{}
	s := NewStore(StoreOptions{Append: ml.append})
	ctx := context.Background()
	inst := "static-1"
	g := GroupSnapshot{Group: "g", ProtocolType: "consumer", Protocol: "range", Leader: "m1", Generation: 4, StateTimestamp: 99,
		Members: []MemberSnapshot{{MemberID: "m1", InstanceID: &inst, ClientID: "c", ClientHost: "/127.0.0.1",
			RebalanceTimeoutMs: 60000, SessionTimeoutMs: 45000, Subscription: []byte{1, 2}, Assignment: []byte{3}}}}
	empty := GroupSnapshot{Group: "e", ProtocolType: "consumer", Generation: 2, StateTimestamp: 5}
	for _, x := range []GroupSnapshot{g, empty} {
		if err := s.StoreGroup(ctx, 1, x); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(ctx, 1, "d", []Commit{{TopicPartition{"t", 0}, off(5, 0)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreGroup(ctx, 1, GroupSnapshot{Group: "d", ProtocolType: "consumer"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteGroup(ctx, 1, "d"); err != nil {
		t.Fatal(err)
	}
	r, gs := ml.reload(t, 1, nil)
	empty.Members = []MemberSnapshot{}
	want := []GroupSnapshot{g, empty, {Group: "d"}}
	if !reflect.DeepEqual(gs, want) {
		t.Fatalf("loaded groups\n%+v\nwant\n%+v", gs, want)
	}
	if gs[1].Members == nil || gs[2].Members != nil {
		t.Fatal("an Empty group must load with non-nil members and a deleted one with nil")
	}
	if len(r.FetchAll("d")) != 0 {
		t.Fatal("DeleteGroup left offsets")
	}
}

func TestStoreExpireOffsetsOfEmptyGroupsOnly(t *testing.T) {
	ml := &memLog{}
	now := time.UnixMilli(10_000)
	s := NewStore(StoreOptions{Append: ml.append, Now: func() time.Time { return now }})
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Commit(ctx, 0, "empty", []Commit{{TopicPartition{"t", 0}, off(1, 1_000)}, {TopicPartition{"t", 1}, off(1, 9_500)}}))
	must(s.Commit(ctx, 0, "stable", []Commit{{TopicPartition{"t", 0}, off(1, 1_000)}}))
	explicit := off(1, 1_000)
	explicit.ExpireTimestamp = 5_000 // a v1 commit's retention: expires whatever the state
	must(s.Commit(ctx, 0, "stable", []Commit{{TopicPartition{"u", 0}, explicit}}))
	n, emptied, err := s.ExpireOffsets(ctx, time.Second, func(g, _ string) bool { return g == "empty" })
	must(err)
	if n != 2 || len(emptied) != 0 {
		t.Fatalf("expired %d (emptied %v), want 2 and none emptied", n, emptied)
	}
	now = now.Add(time.Second)
	n, emptied, err = s.ExpireOffsets(ctx, time.Second, func(g, _ string) bool { return g == "empty" })
	must(err)
	if want := []GroupPartition{{"empty", 0}}; n != 1 || !reflect.DeepEqual(emptied, want) {
		t.Fatalf("second pass expired %d emptied %v, want 1 and %v", n, emptied, want)
	}
	if _, ok := s.Fetch("empty", TopicPartition{"t", 0}); ok {
		t.Fatal("old offset of an Empty group kept")
	}
	if _, ok := s.Fetch("empty", TopicPartition{"t", 1}); ok {
		t.Fatal("offset of an Empty group kept past its retention")
	}
	if _, ok := s.Fetch("stable", TopicPartition{"t", 0}); !ok {
		t.Fatal("offset of a Stable group expired")
	}
	if _, ok := s.Fetch("stable", TopicPartition{"u", 0}); ok {
		t.Fatal("offset past its explicit expire timestamp kept")
	}
	r, _ := ml.reload(t, 0, nil)
	if _, ok := r.Fetch("empty", TopicPartition{"t", 0}); ok {
		t.Fatal("expiry wrote no tombstone")
	}
}

func TestStoreUnloadForgetsOnlyThatPartition(t *testing.T) {
	ml := &memLog{}
	s := NewStore(StoreOptions{Append: ml.append})
	ctx := context.Background()
	_ = s.Commit(ctx, 0, "a", []Commit{{TopicPartition{"t", 0}, off(1, 0)}})
	_ = s.Commit(ctx, 1, "b", []Commit{{TopicPartition{"t", 0}, off(1, 0)}})
	s.Unload(0)
	if got := s.Groups(); !reflect.DeepEqual(got, []string{"b"}) {
		t.Fatalf("groups after unload %v", got)
	}
	if got := s.GroupsOf(1); !reflect.DeepEqual(got, []string{"b"}) || len(s.GroupsOf(0)) != 0 {
		t.Fatalf("GroupsOf(1) = %v, GroupsOf(0) = %v", got, s.GroupsOf(0))
	}
}

// TestRecordsGolden pins the bytes of each record against Kafka's layout
// (written out by hand from the schemas in Kafka's
// group-coordinator/src/main/resources/common/message/*.json), and checks
// kmsg's decoders read them back.
func TestRecordsGolden(t *testing.T) {
	kv := OffsetCommitRecord("g", "t", 2, &Offset{Offset: 42, LeaderEpoch: 7, Metadata: "md", CommitTimestamp: 1000, ExpireTimestamp: -1})
	wantKey := "0001" + "0001" + "67" + "0001" + "74" + "00000002"
	wantVal := "0003" + "000000000000002a" + "00000007" + "0002" + "6d64" + "00000000000003e8"
	if hex.EncodeToString(kv.Key) != wantKey || hex.EncodeToString(kv.Value) != wantVal {
		t.Fatalf("offset record\nkey %x want %s\nval %x want %s", kv.Key, wantKey, kv.Value, wantVal)
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(kv.Value); err != nil || v.Offset != 42 || v.LeaderEpoch != 7 || v.Metadata != "md" {
		t.Fatalf("kmsg decode %+v %v", v, err)
	}
	kv = OffsetCommitRecord("g", "t", 2, &Offset{Offset: 1, Metadata: "", CommitTimestamp: 1, ExpireTimestamp: 2})
	wantVal = "0001" + "0000000000000001" + "0000" + "0000000000000001" + "0000000000000002"
	if hex.EncodeToString(kv.Value) != wantVal {
		t.Fatalf("v1 offset value %x want %s", kv.Value, wantVal)
	}
	g := GroupMetadataRecord(GroupSnapshot{Group: "g", ProtocolType: "consumer", Protocol: "range", Leader: "m", Generation: 1, StateTimestamp: 2,
		Members: []MemberSnapshot{{MemberID: "m", ClientID: "c", ClientHost: "h", RebalanceTimeoutMs: 3, SessionTimeoutMs: 4, Subscription: []byte{5}, Assignment: []byte{6}}}}, false)
	wantKey = "0002" + "0001" + "67"
	wantVal = "0003" + "0008" + hex.EncodeToString([]byte("consumer")) + "00000001" + "0005" + hex.EncodeToString([]byte("range")) +
		"0001" + "6d" + "0000000000000002" + "00000001" + // members: array of 1
		"0001" + "6d" + "ffff" + "0001" + "63" + "0001" + "68" + "00000003" + "00000004" + "00000001" + "05" + "00000001" + "06"
	if hex.EncodeToString(g.Key) != wantKey || hex.EncodeToString(g.Value) != wantVal {
		t.Fatalf("group record\nkey %x want %s\nval %x\nwant %s", g.Key, wantKey, g.Value, wantVal)
	}
	if tomb := GroupMetadataRecord(GroupSnapshot{Group: "g"}, true); tomb.Value != nil || !bytes.Equal(tomb.Key, g.Key) {
		t.Fatal("group tombstone")
	}
}

func TestBuildBatchValidatesAndDecodes(t *testing.T) {
	recs := []KV{OffsetCommitRecord("g", "t", 0, &Offset{Offset: 9, LeaderEpoch: -1, ExpireTimestamp: -1}), OffsetCommitRecord("g", "t", 1, nil)}
	b := BuildBatch(recs, 1234)
	h, err := batch.Validate(b, batch.Limits{MaxBatchBytes: 1 << 20, TimestampBeforeMaxMs: -1, TimestampAfterMaxMs: -1})
	if err != nil {
		t.Fatal(err)
	}
	if h.NumRecords != 2 || h.ProducerID != -1 || h.Codec() != batch.CodecNone || h.MaxTimestamp != 1234 {
		t.Fatalf("header %+v", h)
	}
	batch.SetBaseOffset(b, 100)
	var got []Entry
	var offs []int64
	if err := DecodeBatch(b, func(o int64, e Entry) error { offs, got = append(offs, o), append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || offs[0] != 100 || offs[1] != 101 || got[0].Offset.Offset != 9 || !got[1].Deleted || got[0].Deleted {
		t.Fatalf("decoded %v %+v", offs, got)
	}
}

func TestDecodeRecordRejectsGarbageAndSkipsNewKeys(t *testing.T) {
	if _, _, err := DecodeRecord([]byte{0}, nil); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("short key: %v", err)
	}
	if _, _, err := DecodeRecord([]byte{0, 1, 0, 9}, nil); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("truncated key: %v", err)
	}
	kv := OffsetCommitRecord("g", "t", 0, &Offset{ExpireTimestamp: -1})
	if _, _, err := DecodeRecord(kv.Key, kv.Value[:5]); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("truncated value: %v", err)
	}
	if _, ok, err := DecodeRecord([]byte{0, 5, 0, 0}, []byte{0}); ok || err != nil {
		t.Fatalf("unknown key version: ok %v err %v", ok, err)
	}
}

// BenchmarkLoaderReplay replays batches of 100 OffsetCommit records (the
// load of a __consumer_offsets partition, minus the reads): records/s is
// what bounds COORDINATOR_LOAD_IN_PROGRESS after a failover.
func BenchmarkLoaderReplay(b *testing.B) {
	const perBatch = 100
	var batches [][]byte
	for i := range 100 {
		recs := make([]KV, perBatch)
		for j := range recs {
			recs[j] = OffsetCommitRecord("group-"+strconv.Itoa(j%10), "topic", int32(j), &Offset{Offset: int64(i), LeaderEpoch: 1, CommitTimestamp: 1, ExpireTimestamp: -1})
		}
		batches = append(batches, BuildBatch(recs, 1))
	}
	s := NewStore(StoreOptions{})
	b.ResetTimer()
	for range b.N {
		l := NewLoader(s, 0)
		for _, bt := range batches {
			if err := l.Batch(bt); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(batches)*perBatch)/b.Elapsed().Seconds(), "records/s")
}

// TestStoreConcurrentCommitsMatchTheLog: commits racing on one partition
// leave in memory exactly what a reload of the log gives (the write lock
// installs them in log order).
func TestStoreConcurrentCommitsMatchTheLog(t *testing.T) {
	ml := &memLog{}
	s := NewStore(StoreOptions{Append: ml.append})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				c := []Commit{{TopicPartition{"t", int32(i % 3)}, off(int64(w*1000+i), 0)}}
				if err := s.Commit(context.Background(), 2, "g", c); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	r, _ := ml.reload(t, 2, nil)
	if got, want := s.FetchAll("g"), r.FetchAll("g"); !reflect.DeepEqual(got, want) {
		t.Fatalf("in memory %+v, log says %+v", got, want)
	}
}
