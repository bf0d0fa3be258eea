// Package storage is the hot tier: one partition's local log ([Log]) and
// the [Manager] of the data directories (log.dirs, JBOD) full of them.
//
// It owns the files under each data directory (held with a .lock file
// while a process uses it): segments of Kafka v2 record
// batches stored byte for byte as the wire carries them, their sparse
// memory-mapped offset and time indexes (storage/index), producer-state
// snapshot files (their content belongs to the broker, their lifecycle
// here), the partition side of transactions (markers as control batches,
// [Log.AppendMarker]; the last stable offset; the aborted-transaction
// index .txnindex, [Log.AbortedTxns]; the transaction table and its
// .txnsnapshot: txn.go), the recovery-point, log-start-offset and leader-epoch checkpoints
// (storage/checkpoint), recovery after a crash, retention, log compaction
// (cleanup.policy=compact: cleaner.go, cleaner-offset-checkpoint), truncation and
// the hooks tiering needs (sealed segments, a local log start offset kept
// apart from the log start offset). Every file is reached through
// [vfs.FS], so tests swap in an in-memory, crash-modelling or
// fault-injecting file system.
//
// It must never open a socket, parse a Kafka request, talk to an object
// store, or call os.* for a file (CI greps for it). It never holds record
// data in the Go heap beyond the caller's buffer: appends go from the
// request buffer to the page cache, reads hand back file regions
// ([ReadView]) for sendfile. The log cleaner alone reads records into
// memory, through bounded (1 MiB) windows.
//
// Usage:
//
//	m, err := storage.OpenManager(storage.ManagerOptions{Dir: "/var/lib/strata", Default: storage.DefaultConfig()})
//	if err != nil { ... }
//	m.Start()
//	defer m.Close() // flush, checkpoints, clean-shutdown marker
//
//	l, err := m.GetOrCreate("orders", 0, storage.DefaultConfig())
//	info, err := l.Append(records, storage.AppendOptions{LeaderEpoch: 5, AssignOffsets: true})
//	// records' base offsets are now patched in place; info.FirstOffset..LastOffset assigned
//
//	v, err := l.Read(fetchOffset, maxBytes, highWatermark)
//	if err != nil { ... } // ErrOffsetOutOfRange below the local start or past the end
//	defer v.Release()
//	// send v.File[v.Pos : v.Pos+v.Size]; the next fetch starts at v.NextOffset
//
// See DESIGN.md for the file map, lock order and invariants.
package storage
