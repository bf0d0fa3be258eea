package tiering

import (
	"testing"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
)

// benchFinished returns n COPY_FINISHED segments of 1000 offsets each,
// sorted by base offset, every tenth one duplicated by a segment a new
// leader cut wider (so the coverage walk has something to find).
func benchFinished(n int) []metadata.RemoteSegmentInfo {
	segs := make([]metadata.RemoteSegmentInfo, 0, n)
	for i := 0; len(segs) < n; i++ {
		base := int64(i) * 1000
		segs = append(segs, metadata.RemoteSegmentInfo{
			SegmentID: uuid.New(), BaseOffset: base, EndOffset: base + 999,
			MaxTimestamp: testTs + int64(i), SizeBytes: 1 << 20, State: metadata.CopyFinished,
		})
		if i%10 == 9 && len(segs) < n {
			segs = append(segs, metadata.RemoteSegmentInfo{
				SegmentID: uuid.New(), BaseOffset: base, EndOffset: base + 1999,
				MaxTimestamp: testTs + int64(i+1), SizeBytes: 2 << 20, State: metadata.CopyFinished,
			})
		}
	}
	return segs
}

// BenchmarkRetentionCoverage10k times remote retention's coverage walk
// (which finished segments another covers) over 10,000 segments.
func BenchmarkRetentionCoverage10k(b *testing.B) {
	segs := benchFinished(10_000)
	for b.Loop() {
		red, live := splitCovered(segs)
		if len(red) == 0 || len(live) == 0 {
			b.Fatal("nothing covered")
		}
	}
}
