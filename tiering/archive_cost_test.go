package tiering

import (
	"strings"
	"testing"

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
	return strings.HasSuffix(key, "/"+ManifestName)
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
