package controller

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Storage is the durable Raft log the node writes through. It is
// raft.Storage (what raft reads) plus the three writes the Ready loop makes.
// controller/raftlog's *Storage is the production implementation;
// [NewMemoryStorage] is the reference one for tests.
//
// Implementations must be safe for concurrent use: raft reads from the Ready
// loop goroutine while Watch readers call Entries and Snapshot.
//
// Buffers: entries and snapshots passed to Save are owned by raft and must
// not be modified; returned entries must not be modified by the caller.
//
// Errors: raft.ErrCompacted, raft.ErrUnavailable and
// raft.ErrSnapOutOfDate as raft.Storage defines them; any other error from
// Save is fatal to the node (it stops rather than run on an unknown disk).
//
// Idempotence: Save of entries already stored overwrites them (a conflicting
// suffix is dropped); Compact at or below the first index is a no-op;
// CreateSnapshot at or below the current snapshot returns
// raft.ErrSnapOutOfDate.
type Storage interface {
	raft.Storage
	// Save persists, in order, snap (if not empty), ents (overwriting any
	// conflicting suffix) and hs (if not empty), durably, before returning.
	Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error
	// CreateSnapshot durably records a snapshot of the applied state at
	// index, whose data is data.
	CreateSnapshot(index uint64, cs *raftpb.ConfState, data []byte) (*raftpb.Snapshot, error)
	// Compact drops log entries up to and including index.
	Compact(index uint64) error
}

// MemoryStorage is the in-memory reference [Storage]: raft.MemoryStorage
// with Save. Nothing is durable beyond the process, but a test can keep one
// across a node's restart to model a disk that survives.
type MemoryStorage struct {
	*raft.MemoryStorage
}

// NewMemoryStorage returns an empty [MemoryStorage].
func NewMemoryStorage() *MemoryStorage {
	return &MemoryStorage{MemoryStorage: raft.NewMemoryStorage()}
}

// Save implements [Storage].
func (m *MemoryStorage) Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	if !raft.IsEmptySnap(snap) {
		if err := m.ApplySnapshot(snap); err != nil {
			return err
		}
	}
	if len(ents) > 0 {
		if err := m.Append(ents); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(hs) {
		return m.SetHardState(hs)
	}
	return nil
}

var _ Storage = (*MemoryStorage)(nil)
