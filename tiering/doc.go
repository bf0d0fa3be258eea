// Package tiering moves a partition's sealed segments to an object store
// and back, so a topic keeps months of data while its local disk holds
// hours.
//
// # What it owns
//
//	piece              where
//	object store seam  objstore/ (filesystem, S3, in-memory; faults, retry, metrics)
//	store wiring       store.go: OpenStore from broker config (backend, retry, metrics)
//	object keys        paths.go: the one place every key is built
//	partition manifest manifest.go: JSON per partition, conditional updates
//	broker contract    api.go: Partition, RemoteSegment, Metadata, LeaderPartition, metric names;
//	                   log.go: Log, the storage.Log methods tiering uses
//	planner            plan.go: the uploader's decisions, pure (what to copy, what
//	                   retention deletes, what is an orphan); scripts in testdata/plan
//	uploader           uploader*.go: the planner's shell: sealed committed segments →
//	                   bucket on a bounded pool; remote retention, orphans, deleted
//	                   topics; uploader_health.go: the store probe that wakes every
//	                   retry when an outage ends
//	remote reader      reader.go, reader_index.go: fetches below the local log start;
//	                   reader_segment.go, reader_readahead.go, reader_flight.go: a
//	                   segment's .log by chunks, read-ahead, GETs shared per chunk/index;
//	                   readahead_policy.go: the read-ahead depth (pure);
//	                   reader_view.go: reads as views of the cache (sendfile, no copy);
//	                   reader_fetch.go: a fetch's read, coalesced, within its wait;
//	                   reader_missing.go: segments whose objects are gone (one steady error)
//	chunk cache        cache.go, cache_index.go: 2Q on disk, bounded; budget.go: GET slots, byte rate;
//	                   budget_share.go: GET bytes capped while producers suffer
//	restore            restore.go: a topic's manifests and records from the bucket alone
//	bucket             bucket.go: every topic in the bucket (tier list); registered
//	                   segments' objects checked against it (tier verify)
//
// DESIGN.md has the file map, the lock order and the invariants.
//
// # What it must never do
//
// Block a produce or a tail fetch on the object store (invariant 5 of
// docs/architecture.md): every object-store call runs on a tiering
// goroutine under a deadline, never on the request path of data that is
// still local. It never deletes a local segment for lack of space: storage's
// local retention does, and only below the offset whose upload the
// controller has committed (remote retention moving the whole log's start
// drops local segments below it, as DeleteRecords does). It never writes a segment object twice: keys carry the
// segment's uuid and segment data is put create-only.
//
// # Remote segment lifecycle
//
// Each remote segment moves through Kafka's RemoteLogSegmentState, each
// step committed in the controller (controller/metadata
// RemoteSegmentRecord) and mirrored in the bucket's manifest:
//
//	(none) ──▶ COPY_STARTED ──▶ COPY_FINISHED
//	                │                 │
//	                │ (orphan)        │ (retention)
//	                ▼                 ▼
//	           DELETE_STARTED ◀───────┘
//	                │
//	                ▼
//	           DELETE_FINISHED ──▶ (gone from the manifest)
//
// What each step means:
//
//   - COPY_STARTED is recorded before the first byte is put; a crash after
//     it leaves objects no COPY_FINISHED names: orphans that remote
//     retention deletes (COPY_STARTED → DELETE_STARTED), never a hole,
//     because readers only read COPY_FINISHED segments.
//   - COPY_FINISHED is recorded after every object of the segment is put;
//     only then may the local copy be deleted.
//   - DELETE_STARTED is recorded before the first object is deleted, and
//     remote retention moves the log start past the segment at once (a
//     store outage must not leave fetches pointed at half-deleted data);
//     DELETE_FINISHED is recorded after the last; then the segment leaves
//     the manifest.
//   - Every state may be recorded again (a self-transition), so each step
//     is safe to retry after a crash or a lost acknowledgement.
//
// # Keys and manifest
//
// A segment archived since issue 20 is two objects: its .log exactly as
// on local disk and its .meta (pack.go), one object holding what were,
// before, five separate objects, which readers still read for segments
// archived then (ReadSegmentFile falls back to them):
//
// A segment's six objects were its .log, .index and .timeindex exactly as
// on local disk, the producer snapshot at its end (.snapshot, empty when
// there is none), its leader-epoch entries (.epochs, Kafka's
// leader-epoch-checkpoint text restricted to the segment: see
// uploader.go) and its aborted-transaction index (.txnindex as on local
// disk, empty when the segment holds no ABORT marker; segments uploaded
// before transactions have none, which verification and restore accept
// for a size-0 entry, and the manifest records its size only when
// non-zero, so older brokers still decode it). The broker hands the
// uploader a copy bound of min(HW, LSO): nothing at or past an open
// transaction is ever uploaded. The partition's manifest.json lists its
// segments, so a partition can be rebuilt from the bucket alone
// (restore.go). Since version 2 a change is a small chunk object
// (manifest.d/<seq>.json) beside manifest.json, folded into it every 64
// (manifest_chunks.go), so a change costs the same whatever the history.
//
//	key := tiering.SegmentKey(prefix, "orders", topicID, 3, 123456, segID, tiering.ExtLog)
//	// prefix/orders-<topicID>/3/00000000000000123456-<segID>.log
//
//	ms := tiering.NewManifestStore(store)
//	_, err := ms.Update(ctx, tiering.ManifestKey(prefix, "orders", topicID, 3), func(m *tiering.Manifest) error {
//		m.Topic, m.TopicID, m.Partition = "orders", topicID, 3
//		if m.Find(segID) < 0 {
//			m.Segments = append(m.Segments, seg) // idempotent: fn may run more than once
//		}
//		return nil
//	})
package tiering
