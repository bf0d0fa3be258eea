package controller

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/strata-io/strata/controller/metadata"
)

// Metadata offsets are Raft log indexes. An entry carries one batch of
// records (metadata.EncodeBatch: what one decision planned), all applied at
// the entry's index with metadata.State.ApplyBatch, so a decision is atomic
// in the log and a broker that has applied offset N has applied every
// decision up to entry N. Entries without records (a new leader's empty
// entry, membership changes) advance the offset too, so offsets are dense
// in the log but a watcher only sees entries with records.

// metadataFSM is the [FSM] over metadata.State. The Ready loop applies
// under mu's write lock; planners and readers take the read lock.
type metadataFSM struct {
	logger *slog.Logger
	// mu guards st and refused. The decider holds the read lock while
	// planning; the Ready loop takes the write lock to apply.
	mu sync.RWMutex
	st *metadata.State
	// refused counts records ApplyBatch refused (inconsistent with the
	// state); every replica refuses the same ones.
	refused int
	// defaults are the static broker configs the planners fall back to
	// (min.insync.replicas, unclean.leader.election.enable), set on every
	// image this FSM holds, restored ones included.
	defaults metadata.Defaults
	// recordsAt is the offset of the last applied entry with records (or
	// of the restored image): the offset a watcher's last delta has once
	// it is caught up. Heartbeat answers carry it (a broker below it for
	// long follows a stream that is behind). Atomic: planners read it
	// under mu's read lock.
	recordsAt atomic.Int64
}

func newMetadataFSM(l *slog.Logger, d metadata.Defaults) *metadataFSM {
	st := metadata.NewState()
	st.SetDefaults(d)
	return &metadataFSM{logger: l, st: st, defaults: d}
}

// Apply implements FSM. A payload that does not decode is an error (the
// node stops: the log is the source of truth and cannot be skipped); a
// record the state refuses is skipped, identically on every replica.
func (f *metadataFSM) Apply(index uint64, data []byte) error {
	var recs []metadata.Record
	if len(data) > 0 {
		var err error
		if recs, err = metadata.DecodeBatch(data); err != nil {
			return fmt.Errorf("%w: entry %d: %v", ErrCorruptEntry, index, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	off := int64(index)
	if off <= f.st.Offset() {
		return nil // already in the image (replayed below a snapshot)
	}
	if len(recs) == 0 {
		return f.st.AdvanceTo(off)
	}
	err := f.st.ApplyBatch(off, recs)
	if !errors.Is(err, metadata.ErrOffsetRegression) {
		f.recordsAt.Store(off) // delivered to watchers, refused records and all
	}
	if err != nil {
		if errors.Is(err, metadata.ErrOffsetRegression) {
			return err
		}
		// Plans are made on the leader's current state, so only raw
		// proposals get here.
		f.refused++
		f.logger.Warn("controller: records refused by the metadata state", "offset", off, "err", err)
	}
	return nil
}

// Snapshot implements FSM.
func (f *metadataFSM) Snapshot() ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.Marshal()
}

// Restore implements FSM.
func (f *metadataFSM) Restore(index uint64, data []byte) error {
	st, err := metadata.Unmarshal(data)
	if err != nil {
		return err
	}
	if st.Offset() > int64(index) {
		return fmt.Errorf("controller: snapshot at index %d holds offset %d", index, st.Offset())
	}
	st.SetDefaults(f.defaults)
	f.mu.Lock()
	f.st = st
	f.recordsAt.Store(st.Offset())
	f.mu.Unlock()
	return nil
}

// read runs fn with the state read-locked. fn must not keep st.
func (f *metadataFSM) read(fn func(st *metadata.State)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.st)
}
