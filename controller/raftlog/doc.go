// Package raftlog is the controller's durable Raft storage: a write-ahead
// log (WAL) of entries and hard state, checksummed snapshot files, log
// compaction and crash recovery, behind etcd raft's [raft.Storage]
// interface.
//
// raftlog owns the files of one metadata log directory
// (metadata.log.dir/__cluster_metadata-0): the `<first index>.wal`
// segments, the `<term>-<index>.snap` snapshots and their `.tmp` and
// `.corrupt` siblings. It is the one place in Strata that always fsyncs:
// [Storage.Save] returns only once everything it was given is durable. It
// must never interpret entry payloads or snapshot data (those belong to
// controller/metadata), never send messages or tick raft (controller/
// does), and never touch a file except through the [vfs.FS] it was opened
// with.
//
// Usage, by the Ready loop (raft's order: persist, send, apply, advance):
//
//	st, err := raftlog.Open(raftlog.Options{FS: vfs.Default, Dir: dir})
//	if err != nil { ... }              // ErrCorrupt: refuse to start
//	rep := st.Recovery()               // what recovery truncated, if anything
//	if last, _ := st.LastIndex(); last == 0 {
//		// A new node: bootstrap as raft recommends, with a first snapshot
//		// holding the voters (the log then starts at index 2).
//		st.Save(nil, nil, &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
//			Index: proto.Uint64(1), Term: proto.Uint64(1), ConfState: &voters}})
//	}
//	snap, _ := st.Snapshot()           // restore the state machine from it
//	rn, _ := raft.NewRawNode(&raft.Config{Storage: st, Applied: snapIndex, ...})
//	for each Ready rd {
//		if err := st.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
//			// ErrFailed is latched: stop the node, reopen to recover
//		}
//		send(rd.Messages)
//		apply(rd.CommittedEntries)
//		rn.Advance(rd)
//	}
//	// now and then, at an applied index:
//	st.CreateSnapshot(applied, &confState, fsm.Marshal())
//	st.Compact(applied - keep)
//
// After Open, FirstIndex()-1 is exactly the index of the snapshot returned
// by Snapshot (0 when there is none), so raft's initial applied index
// matches a state machine restored from that snapshot; committed entries
// after it are handed back by raft and must be applied again.
//
// # Files
//
//	doc.go      this overview
//	storage.go  Storage: Save, CreateSnapshot, Compact, the raft.Storage reads
//	memlog.go   the in-memory log (entries since the last compaction)
//	wal.go      file names, the frame and batch byte layouts, format migration
//	snap.go     snapshot file layout, durable write, verified read
//	recover.go  Open: the one recovery function (tmp cleanup, snapshot
//	            fallback, WAL replay, torn-tail truncation, reconciliation)
//
// # Concurrency
//
// All methods are safe for concurrent use. Two locks: wmu serializes the
// writers (Save, CreateSnapshot, Compact, Close) and guards the files; mu
// guards what readers see. Lock order is wmu then mu. A writer does its
// I/O holding only wmu and takes mu for the moment it publishes, so raft's
// reads (Term, Entries, ...) and Stats never wait for an fsync.
//
// # Invariants
//
//  1. A Save that returned is durable and survives any crash: its batch is
//     one checksummed frame, written with one write and fsynced; new
//     segments, snapshot renames, removals and new directories are
//     followed by a directory fsync.
//  2. A Save that did not return is all or nothing after a crash (one
//     frame), and recovery cuts it off only if nothing valid follows;
//     otherwise Open fails with ErrCorrupt rather than lose acknowledged
//     entries.
//  3. The WAL holds every live entry after the oldest kept snapshot, so
//     a corrupt newest snapshot falls back to an older one plus the WAL.
//  4. The newest segment always holds the latest hard state: deleting
//     older segments never loses the term or the vote.
//  5. After a failed write nothing more is written (ErrFailed) until the
//     directory is reopened and recovered.
package raftlog
