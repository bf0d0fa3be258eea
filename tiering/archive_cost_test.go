package tiering

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-io/strata/internal/miniotest"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/tiering/objstore"
)

// archiveCost is what a run of store calls would have cost on S3 with
// this multipart threshold and part size, a .log object's size multiplied
// by scale (a small test segment standing for a 1 GiB one): write
// requests (PUT, multipart create/part/complete, DELETE), lists, and the
// bytes put into manifest objects.
type archiveCost struct {
	writes, logWrites, lists int
	manifestBytes            int64
}

func costOf(calls []objstore.Call, scale float64, threshold, partSize int64) archiveCost {
	var c archiveCost
	for _, call := range calls {
		switch call.Op {
		case objstore.OpPut:
			if strings.HasSuffix(call.Key, "."+ExtLog) {
				n := objstore.S3PutRequests(int64(float64(call.Bytes)*scale), threshold, partSize)
				c.writes += n
				c.logWrites += n
				continue
			}
			// Indexes, snapshot, epochs: a few MiB for a 1 GiB segment
			// (an index entry per 4 KiB), under any threshold: one PUT.
			c.writes++
			if isManifestObject(call.Key) {
				c.manifestBytes += call.Bytes
			}
		case objstore.OpDelete:
			c.writes++
		case objstore.OpList:
			c.lists++
		}
	}
	return c
}

func isManifestObject(key string) bool {
	return strings.HasSuffix(key, "/"+ManifestName) || strings.Contains(key, "/"+manifestChunkDir+"/")
}

// oneGiBSegments uploads n equal sealed segments through an uploader over
// a MemStore and returns the store's calls and the scale that makes each
// segment's .log 1 GiB.
func oneGiBSegments(t *testing.T, n int) ([]objstore.Call, float64) {
	t.Helper()
	p, meta, tp := ordersPart(t)
	counts := make([]int, n)
	for i := range counts {
		counts[i] = 4
	}
	tp.appendSegments(t, testTs, counts...)
	store := objstore.NewMemStore()
	u := newTestUploader(t, store, meta, nil)
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "segments uploaded", func() bool { return len(meta.finished(p.TopicID, 0)) == n })
	settle(t, u)
	scale := float64(1<<30) / float64(tp.Log.Segments()[0].Size)
	return store.Calls(), scale
}

// The archive's write requests per 1 GiB segment: with 16 MiB parts and a
// 32 MiB threshold (the defaults before issue 20) the .log alone took 66
// requests; with the defaults now (256 MiB parts from 512 MiB) it takes
// create + 4 parts + complete, and its other files are one packed .meta
// object, not five: the whole segment costs at most 10.
func TestArchiveWriteRequestsPerGiB(t *testing.T) {
	const segs = 3
	calls, scale := oneGiBSegments(t, segs)
	before := costOf(calls, scale, 32<<20, 16<<20)
	now := costOf(calls, scale, 0, 0)
	t.Logf("per 1 GiB segment: 16 MiB parts (packed): %d writes (.log %d); defaults: %d writes (.log %d); lists %d over %d segments",
		before.writes/segs, before.logWrites/segs, now.writes/segs, now.logWrites/segs, now.lists, segs)
	if before.logWrites != segs*66 {
		t.Fatalf("with 16 MiB parts the .log writes = %d, want %d", before.logWrites, segs*66)
	}
	if now.logWrites != segs*6 {
		t.Fatalf(".log writes with the defaults = %d, want %d", now.logWrites, segs*6)
	}
	if now.writes > segs*10 {
		t.Fatalf("write requests = %d for %d segments: over 10 per GiB", now.writes, segs)
	}
}

// The manifest change that archives a partition's 10,000th segment costs
// what the first did: one small PUT (version 1 rewrote the whole
// manifest, megabytes by then); compaction adds one base PUT and a DELETE
// per chunk every CompactAfter changes.
func TestManifestChangeCostIndependentOfHistory(t *testing.T) {
	ctx := testCtx(t)
	mem := objstore.NewMemStore()
	ms := NewManifestStore(mem)
	key := ManifestKey("strata", "orders.v2_eu-west", testTopicID, 3)
	writes := func() (int, int64) {
		n, b := 0, int64(0)
		for _, c := range mem.Calls() {
			if c.Op == objstore.OpPut || c.Op == objstore.OpDelete {
				n++
				b += c.Bytes
			}
		}
		mem.ResetCalls()
		return n, b
	}
	if _, err := ms.Update(ctx, key, addSegment(testSegment(0, 99))); err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Update(ctx, key, addSegment(testSegment(100, 199))); err != nil {
		t.Fatal(err)
	}
	mem.ResetCalls()
	if _, err := ms.Update(ctx, key, addSegment(testSegment(200, 299))); err != nil {
		t.Fatal(err)
	}
	firstN, firstB := writes()
	// Segments 4 to 9,999 in one change, then the 10,000th on its own.
	if _, err := ms.Update(ctx, key, func(m *Manifest) error {
		for i := int64(3); i < 9_999; i++ {
			if m.Find(segUUID(100*i)) < 0 {
				m.Segments = append(m.Segments, testSegment(100*i, 100*i+99))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mem.ResetCalls()
	m, err := ms.Update(ctx, key, addSegment(testSegment(999_900, 999_999)))
	if err != nil {
		t.Fatal(err)
	}
	lastN, lastB := writes()
	whole, _ := m.Encode()
	t.Logf("manifest change for segment 3: %d writes, %d bytes; for segment 10,000: %d writes, %d bytes (a whole version 1 rewrite: %d bytes)",
		firstN, firstB, lastN, lastB, len(whole))
	if len(m.Segments) != 10_000 || lastN != firstN || lastN != 1 || lastB > 2*firstB {
		t.Fatalf("segment 10,000: %d writes, %d bytes; segment 3: %d writes, %d bytes", lastN, lastB, firstN, firstB)
	}
	if ok, err := ms.Compact(ctx, key); !ok || err != nil {
		t.Fatalf("Compact = %v, %v", ok, err)
	}
	cN, cB := writes()
	t.Logf("compacting %d chunks: %d writes (base PUT and DELETEs), %d bytes; every %d changes: %.2f writes per segment",
		cN-1, cN, cB, DefaultManifestCompactAfter, float64(1+DefaultManifestCompactAfter)/DefaultManifestCompactAfter)
	got, _, err := NewManifestStore(mem).Load(ctx, key)
	if err != nil || len(got.Segments) != 10_000 {
		t.Fatalf("reloaded: %d segments, %v", len(got.Segments), err)
	}
}

// s3WriteCounter counts the write requests (anything but GET and HEAD)
// that reach the S3 server.
type s3WriteCounter struct {
	rt     http.RoundTripper
	writes atomic.Int64
}

func (c *s3WriteCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		c.writes.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// On a real S3 server (MinIO) archiving a segment costs what the model
// says: its .log's multipart requests, one .meta PUT, one manifest PUT
// (the base for the first segment, a chunk after).
func TestArchiveWriteRequestsOnMinIO(t *testing.T) {
	srv := miniotest.Start(t)
	t.Setenv("AWS_CA_BUNDLE", "") // a plain *http.Client: no CA bundle to add; MinIO is plain HTTP here
	wc := &s3WriteCounter{rt: http.DefaultTransport}
	const part, threshold = 5 << 20, 10 << 20
	s3, err := objstore.NewS3Store(testCtx(t), objstore.S3Options{
		Endpoint: srv.Endpoint, Bucket: srv.Bucket, PathStyle: true, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		MultipartThreshold: threshold, PartSize: part, HTTPClient: &http.Client{Transport: wc},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, meta, tp := ordersPart(t)
	ts := int64(testTs)
	for range 2 {
		for range 15 { // 15 batches of 900 kB: a 13.5 MB .log, 3 parts
			if _, err := tp.Log.Append(testBatch(10, 90_000, ts), storage.AppendOptions{LeaderEpoch: tp.epoch.Load(), AssignOffsets: true}); err != nil {
				t.Fatal(err)
			}
			ts += 10
		}
		if err := tp.Log.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	u := newTestUploader(t, s3, meta, nil)
	u.Lead(tp.LeaderPartition)
	waitFor(t, u, "two segments uploaded", func() bool { return len(meta.finished(p.TopicID, 0)) == 2 })
	settle(t, u)
	want := 0
	for _, s := range tp.Log.Segments()[:2] {
		want += objstore.S3PutRequests(s.Size, threshold, part) + 2
	}
	if got := int(wc.writes.Load()); got != want || want != 14 {
		t.Fatalf("%d write requests on the wire for 2 segments, want %d (14)", got, want)
	}
	_, mans, err := FindTopicManifests(testCtx(t), s3, "strata", p.Topic)
	if err != nil || len(mans) != 1 || len(mans[0].Segments) != 2 {
		t.Fatalf("restore from MinIO: %+v, %v", mans, err)
	}
}
