package tiering

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/tiering/objstore"
)

// canon is a manifest's encoding without ChunkSeq (where the state
// came from, not what it is).
func canon(t *testing.T, m Manifest) string {
	t.Helper()
	m.ChunkSeq = 0
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func chunkKeys(mem *objstore.MemStore, key string) []string {
	var out []string
	for _, k := range mem.Keys() {
		if strings.HasPrefix(k, manifestChunkPrefix(key)) {
			out = append(out, k)
		}
	}
	return out
}

func dropSegment(id uuid.UUID, logStart int64) func(*Manifest) error {
	return func(m *Manifest) error {
		m.Segments = slices.DeleteFunc(m.Segments, func(s Segment) bool { return s.SegmentID == id })
		m.LogStartOffset = max(m.LogStartOffset, logStart)
		return nil
	}
}

// Every change after the first is one small create-only chunk; a fresh
// reader (base + chunks) sees exactly what the writer holds, before and
// after compaction folds the chunks into the base and deletes them.
func TestManifestChunksWrittenCompactedReadBack(t *testing.T) {
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	ms := NewManifestStore(mem)
	ms.CompactAfter = 4
	clock := int64(1_000)
	ms.Now = func() time.Time { clock++; return time.UnixMilli(clock) }
	key := ManifestKey("strata", "orders.v2_eu-west", testTopicID, 3)
	check := func(want Manifest) {
		t.Helper()
		got, _, err := NewManifestStore(mem).Load(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if canon(t, got) != canon(t, want) {
			t.Fatalf("reader sees\n%s\nwriter holds\n%s", canon(t, got), canon(t, want))
		}
	}
	var last Manifest
	for i := range int64(6) {
		mem.ResetCalls()
		m, err := ms.Update(ctx, key, addSegment(testSegment(100*i, 100*i+99)))
		if err != nil {
			t.Fatal(err)
		}
		puts := 0
		for _, c := range mem.Calls() {
			if c.Op == objstore.OpPut {
				puts++
				if i > 0 && (c.Key != manifestChunkKey(key, i) || c.Mode != objstore.CreateOnly || c.Bytes > 1024) {
					t.Fatalf("update %d put %s (%d bytes, mode %v), want chunk %d", i, c.Key, c.Bytes, c.Mode, i)
				}
			}
			if c.Op == objstore.OpGet || c.Op == objstore.OpList {
				t.Fatalf("update %d read %s %s: the writer knows its manifest", i, c.Op, c.Key)
			}
		}
		if puts != 1 {
			t.Fatalf("update %d: %d puts, want 1", i, puts)
		}
		check(m)
		last = m
	}
	// A removal with a log start raise, and a config change, are chunks too.
	m, err := ms.Update(ctx, key, dropSegment(segUUID(0), 100))
	if err != nil {
		t.Fatal(err)
	}
	m, err = ms.Update(ctx, key, func(m *Manifest) error { m.Configs = map[string]string{"retention.ms": "-1"}; return nil })
	if err != nil {
		t.Fatal(err)
	}
	check(m)
	if len(m.Segments) != 5 || m.LogStartOffset != 100 || m.Configs["retention.ms"] != "-1" || len(last.Segments) != 6 {
		t.Fatalf("after drop and configs: %+v", m)
	}
	if !ms.CompactionDue(key) || len(chunkKeys(mem, key)) != 7 {
		t.Fatalf("due %v with chunks %v", ms.CompactionDue(key), chunkKeys(mem, key))
	}
	if ok, err := ms.Compact(ctx, key); !ok || err != nil {
		t.Fatalf("Compact = %v, %v", ok, err)
	}
	if ks := chunkKeys(mem, key); len(ks) != 0 || ms.CompactionDue(key) {
		t.Fatalf("chunks left after compaction: %v", ks)
	}
	base, _, err := ms.loadBase(ctx, key)
	if err != nil || base.ChunkSeq != 7 || len(base.Segments) != 5 {
		t.Fatalf("compacted base: chunkSeq %d, %d segments, %v", base.ChunkSeq, len(base.Segments), err)
	}
	check(m)
	// Writing goes on after the base: chunk 8.
	m, err = ms.Update(ctx, key, addSegment(testSegment(600, 699)))
	if err != nil {
		t.Fatal(err)
	}
	if ks := chunkKeys(mem, key); !slices.Equal(ks, []string{manifestChunkKey(key, 8)}) {
		t.Fatalf("chunks %v, want chunk 8", ks)
	}
	check(m)
	// A chunk an interrupted compaction left (at or below chunkSeq) is
	// skipped by readers and deleted by the next compaction.
	stale := manifestChunkKey(key, 3)
	if _, err := mem.Put(ctx, stale, strings.NewReader("garbage"), 7, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	check(m)
	if ok, err := NewManifestStore(mem).Compact(ctx, key); !ok || err != nil {
		t.Fatalf("Compact = %v, %v", ok, err)
	}
	if ks := chunkKeys(mem, key); len(ks) != 0 {
		t.Fatalf("chunks left: %v", ks)
	}
	check(m)
}

// A writer whose state predates a compaction may create a chunk of a seq
// the compaction folded and deleted: its Head of the base sees the base
// rewritten, and it re-reads and re-applies, so its change is not lost
// under the new base.
func TestManifestChunkRacingACompactionIsNotLost(t *testing.T) {
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	key := ManifestKey("strata", "orders.v2_eu-west", testTopicID, 3)
	a, b := NewManifestStore(mem), NewManifestStore(mem)
	for i := range int64(3) {
		if _, err := a.Update(ctx, key, addSegment(testSegment(100*i, 100*i+99))); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := b.Load(ctx, key); err != nil { // b's next chunk: 3
		t.Fatal(err)
	}
	if _, err := a.Update(ctx, key, addSegment(testSegment(300, 399))); err != nil { // chunk 3
		t.Fatal(err)
	}
	if ok, err := a.Compact(ctx, key); !ok || err != nil { // folds and deletes 1..3
		t.Fatalf("Compact = %v, %v", ok, err)
	}
	m, err := b.Update(ctx, key, addSegment(testSegment(400, 499)))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := NewManifestStore(mem).Load(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Segments) != 5 || got.Find(segUUID(400)) < 0 || got.Find(segUUID(300)) < 0 || canon(t, got) != canon(t, m) {
		t.Fatalf("after the race: %d segments, %+v", len(got.Segments), got)
	}
}

// Chunks are refused as strictly as manifests: unknown fields, another
// version, a seq that is not their name's; a gap in the chunks is never
// read past.
func TestManifestChunkDecodeRefusesGarbage(t *testing.T) {
	c := manifestChunk{Version: ManifestVersion, Seq: 4, Put: []Segment{testSegment(0, 99)}, UpdatedAt: 5}
	data, err := encodeChunk(&c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeChunk(data, 4); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"other seq":     data,
		"unknown field": bytes.Replace(data, []byte(`"seq":4`), []byte(`"seq":4,"x":1`), 1),
		"version 1":     bytes.Replace(data, []byte(`"version":2`), []byte(`"version":1`), 1),
		"trailing":      append(bytes.Clone(data), '{', '}'),
		"truncated":     data[:len(data)/2],
	} {
		seq := int64(4)
		if name == "other seq" {
			seq = 5
		}
		if _, err := decodeChunk(bad, seq); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	key := ManifestKey("strata", "orders.v2_eu-west", testTopicID, 3)
	ms := NewManifestStore(mem)
	for i := range int64(3) {
		if _, err := ms.Update(ctx, key, addSegment(testSegment(100*i, 100*i+99))); err != nil {
			t.Fatal(err)
		}
	}
	if err := mem.Delete(ctx, manifestChunkKey(key, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := NewManifestStore(mem).Load(ctx, key); err == nil {
		t.Fatal("a manifest with chunk 1 of 2 gone loaded")
	}
}

// The uploader's manifests compact as segments go up; the bucket alone
// (base + chunks) restores every segment.
func TestUploaderManifestCompactsAndRestores(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 1, 1, 1, 1, 1, 1, 1)
	store := objstore.NewMemStore()
	u := newTestUploader(t, store, meta, nil)
	u.ms.CompactAfter = 3
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "uploaded", func() bool { return len(meta.finished(p.TopicID, 0)) == 7 })
	settle(t, u)
	key := ManifestKey("strata", p.Topic, p.TopicID, 0)
	base, _, err := NewManifestStore(store).loadBase(testCtx(t), key)
	if err != nil || base.ChunkSeq == 0 {
		t.Fatalf("base never compacted: %+v, %v", base, err)
	}
	if n := len(chunkKeys(store, key)); n >= 3 {
		t.Fatalf("%d chunks left, compaction after 3", n)
	}
	_, mans, err := FindTopicManifests(testCtx(t), store, "strata", p.Topic)
	if err != nil || len(mans) != 1 || len(mans[0].Segments) != 7 {
		t.Fatalf("restore found %+v, %v", mans, err)
	}
	for i, s := range meta.finished(p.TopicID, 0) {
		if mans[0].Segments[i].SegmentID != s.SegmentID {
			t.Fatalf("restored segment %d is %s, metadata %s", i, mans[0].Segments[i].SegmentID, s.SegmentID)
		}
	}
}
