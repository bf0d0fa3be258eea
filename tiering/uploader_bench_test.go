package tiering

import (
	"context"
	"os"
	"testing"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/tiering/objstore"
)

// benchSegment writes one sealed segment of about 8 MiB (80 batches of
// 100 records of 1000 bytes) on the OS file system.
func benchSegment(b *testing.B) *testPart {
	b.Helper()
	tp := openTestPart(b, vfs.Default, b.TempDir(), upPart("orders", 0))
	for i := range 80 {
		if _, err := tp.Log.Append(testBatch(100, 1000, testTs+int64(i)), storage.AppendOptions{LeaderEpoch: 3, AssignOffsets: true}); err != nil {
			b.Fatal(err)
		}
	}
	if err := tp.Log.Roll(); err != nil {
		b.Fatal(err)
	}
	return tp
}

// BenchmarkUploadSegment compares one segment's full copy by the uploader
// (COPY_STARTED, five create-only puts, manifest update, COPY_FINISHED)
// with raw create-only puts of the same four files, both into an FSStore
// on a temporary directory. MB/s is of the .log bytes; the ratio of the
// two is the uploader's overhead.
func BenchmarkUploadSegment(b *testing.B) {
	tp := benchSegment(b)
	local := tp.Log.Segments()
	seg := local[0]
	b.Run("uploader", func(b *testing.B) {
		store, err := objstore.NewFSStore(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		meta := newTestMeta()
		meta.createTopic(b, "orders", upTopicID, 1)
		u, err := NewUploader(UploaderConfig{Store: store, Prefix: "strata", Meta: meta, BrokerID: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer u.Close()
		ctx := context.Background()
		b.SetBytes(seg.Size)
		for b.Loop() {
			if err := u.copySegment(ctx, tp.LeaderPartition, seg, testLeaderEpoch); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			// Start each copy from the same state: no finished segment,
			// no manifest, an empty bucket.
			fin := meta.finished(upTopicID, 0)
			if err := u.deleteSegments(ctx, "orders", fin, false, -1, metadata.UnknownLeaderEpoch); err != nil {
				b.Fatal(err)
			}
			if err := store.Delete(ctx, ManifestKey("strata", "orders", upTopicID, 0)); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("raw-put", func(b *testing.B) {
		store, err := objstore.NewFSStore(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		paths := []string{seg.LogPath, seg.IndexPath, seg.TimeIndexPath, local[1].SnapshotPath}
		b.SetBytes(seg.Size)
		for b.Loop() {
			id := uuid.New()
			var keys []string
			for i, p := range paths {
				if p == "" {
					continue
				}
				f, err := os.Open(p)
				if err != nil {
					b.Fatal(err)
				}
				st, _ := f.Stat()
				key := SegmentKey("strata", "orders", upTopicID, 0, 0, id, SegmentExts[i])
				if _, err := store.Put(ctx, key, f, st.Size(), objstore.PutOptions{Mode: objstore.CreateOnly}); err != nil {
					b.Fatal(err)
				}
				f.Close()
				keys = append(keys, key)
			}
			b.StopTimer()
			for _, k := range keys {
				if err := store.Delete(ctx, k); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
	})
}
