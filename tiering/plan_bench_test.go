package tiering

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
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

// BenchmarkPlan10k times a whole pass's plan over 10,000 remote segments
// (retention by bytes deleting the older half) and 100 local ones.
func BenchmarkPlan10k(b *testing.B) {
	remote := benchFinished(10_000)
	end := remote[len(remote)-1].EndOffset
	var local []storage.SegmentInfo
	for i := range 100 {
		base := end + 1 + int64(i)*1000
		local = append(local, storage.SegmentInfo{BaseOffset: base, NextOffset: base + 1000, Size: 1 << 20, Sealed: i < 99})
	}
	in := PlanInput{
		Local: local, Remote: remote, HighWatermark: end + 100_000, LogEnd: end + 100_000,
		Config:   storage.Config{CleanupPolicy: "delete", RetentionMs: -1, RetentionBytes: 6000 << 20},
		Now:      time.UnixMilli(testTs),
		Inflight: map[uuid.UUID]bool{}, OrphanGrace: time.Minute, ScanEvery: time.Hour, LastOrphanScan: time.UnixMilli(testTs),
	}
	for b.Loop() {
		acts := Plan(in)
		if len(acts) < 2 {
			b.Fatalf("plan %v", acts)
		}
	}
}
