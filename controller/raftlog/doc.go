// Package raftlog is the controller's durable Raft storage: a write-ahead
// log (WAL) of entries and hard state, checksummed snapshot files, log
// compaction and crash recovery, behind etcd raft's [raft.Storage]
// interface.
//
// raftlog owns the files of one metadata log directory
// (metadata.log.dir/__cluster_metadata-0): the `<first index>.wal`
// segments, the `<term>-<index>.snap` snapshots and their `.tmp` leftovers.
// It is the one place in Strata that always fsyncs: [Storage.Save] returns
// only once everything it was given is durable. It must never interpret
// entry payloads or snapshot data (those belong to controller/metadata),
// never send messages or tick raft (controller/ does), and never touch a
// file except through the [vfs.FS] it was opened with.
//
// Usage, by the Ready loop (the order is raft's: persist, send, apply,
// advance):
//
//	st, err := raftlog.Open(raftlog.Options{FS: vfs.Default, Dir: dir})
//	if err != nil { ... }              // ErrCorrupt: refuse to start
//	rep := st.Recovery()               // what recovery truncated, if anything
//	node := raft.RestartNode(&raft.Config{Storage: st, ...})
//	for rd := range node.Ready() {
//		if err := st.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
//			// the storage has latched ErrFailed: stop the node
//		}
//		send(rd.Messages)
//		apply(rd.CommittedEntries)
//		node.Advance()
//	}
//	// now and then, at an applied index:
//	snap, _ := st.CreateSnapshot(applied, &confState, fsm.Marshal())
//	_ = st.Compact(applied - keep)
//
// After Open, [Storage.FirstIndex]-1 is exactly the index of the snapshot
// returned by [Storage.Snapshot] (zero when there is none), so raft's
// initial applied index matches a state machine restored from that
// snapshot; committed entries after it are delivered again by raft and
// must be applied by the caller.
package raftlog
