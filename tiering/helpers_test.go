package tiering

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

var (
	testTopicID = uuid.MustParse("0f8fad5b-d9cb-469f-a165-70867728950e")
	testSegID   = uuid.MustParse("7c9e6679-7425-40de-944b-e07fc1f90ae7")
)

// testCtx returns a context that ends with the test or after 20s.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// segUUID returns a deterministic, non-nil segment id for n.
func segUUID(n int64) uuid.UUID {
	var id uuid.UUID
	for i := range 8 {
		id[15-i] = byte(n >> (8 * i))
	}
	id[0] = 0xa5
	id[6] = 0x40 // version 4
	id[8] = 0x80 // RFC 4122 variant
	return id
}

// testSegment returns a valid COPY_FINISHED segment covering [base, end].
func testSegment(base, end int64) Segment {
	return Segment{
		SegmentID:    segUUID(base),
		BaseOffset:   base,
		EndOffset:    end,
		MaxTimestamp: 1_764_417_600_000 + base,
		SizeBytes:    1000 * (end - base + 1),
		LeaderEpochs: []EpochEntry{{Epoch: 1, StartOffset: base}},
		State:        StateCopyFinished,
		Files:        FileSizes{Log: 1000 * (end - base + 1), Index: 80, TimeIndex: 120, Snapshot: 10, Epochs: 24},
	}
}

// testManifest returns a valid manifest with segments of 100 offsets
// each starting at the given base offsets.
func testManifest(bases ...int64) Manifest {
	m := Manifest{Version: ManifestVersion, Topic: "orders.v2_eu-west", TopicID: testTopicID, Partition: 3, UpdatedAt: 1_764_417_600_123}
	for _, b := range bases {
		m.Segments = append(m.Segments, testSegment(b, b+99))
	}
	if len(bases) > 0 {
		m.LogStartOffset = bases[0]
	}
	return m
}

// addSegment returns an idempotent Update fn that adds seg to a manifest
// of the test partition.
func addSegment(seg Segment) func(*Manifest) error {
	return func(m *Manifest) error {
		m.Topic, m.TopicID, m.Partition = "orders.v2_eu-west", testTopicID, 3
		if m.Find(seg.SegmentID) >= 0 {
			return nil
		}
		i := 0
		for i < len(m.Segments) && m.Segments[i].BaseOffset < seg.BaseOffset {
			i++
		}
		m.Segments = append(m.Segments[:i], append([]Segment{seg}, m.Segments[i:]...)...)
		return nil
	}
}
