package share

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DefaultUpdatesPerSnapshot is Kafka's
// share.coordinator.snapshot.update.records.per.snapshot (500): after that
// many ShareUpdate records for a key the next write is a ShareSnapshot.
const DefaultUpdatesPerSnapshot = 500

type journalEntry struct {
	state      PersistedState
	createTime int64
	updates    int // ShareUpdate records since the last snapshot
	// snapOffset is the log offset of the record holding the current
	// snapshot (-1 until [Journal.Placed] or [ReplayAt] tells it): every
	// record of the key below it is redundant.
	snapOffset int64
}

// Journal is the share coordinator's view of the share-partitions of one
// __share_group_state partition: it turns Initialize/Write/Delete of
// share state into the records to append, and [Replay] rebuilds it from
// those records. Not safe for concurrent use; it does no I/O, the caller
// appends the records it returns (and applies them only once appended, by
// keeping the Journal in step with the log).
type Journal struct {
	// UpdatesPerSnapshot bounds the updates between two snapshots
	// (DefaultUpdatesPerSnapshot when 0; below 0, every write is a
	// snapshot).
	UpdatesPerSnapshot int
	m                  map[Key]*journalEntry
}

// NewJournal returns an empty journal.
func NewJournal() *Journal { return &Journal{m: make(map[Key]*journalEntry)} }

// State returns the durable state of k, as ReadShareGroupState answers.
func (j *Journal) State(k Key) (PersistedState, bool) {
	e, ok := j.m[k]
	if !ok {
		return PersistedState{}, false
	}
	st := e.state
	st.Batches = append([]StateBatch(nil), st.Batches...)
	return st, true
}

// Keys returns the number of share-partitions the journal holds.
func (j *Journal) Keys() int { return len(j.m) }

// Initialize is InitializeShareGroupState: a fresh snapshot of k at
// stateEpoch with SPSO startOffset. A stateEpoch below the stored one is
// FENCED_STATE_EPOCH.
func (j *Journal) Initialize(k Key, stateEpoch int32, startOffset, nowMs int64) (Record, error) {
	if e, ok := j.m[k]; ok && stateEpoch < e.state.StateEpoch {
		return Record{}, kerr.FencedStateEpoch
	}
	r := Record{Type: SnapshotRecord, Key: k, Snapshot: &SnapshotValue{
		StateEpoch: stateEpoch, LeaderEpoch: -1, StartOffset: startOffset, DeliveryCompleteCount: 0,
		CreateTimestamp: nowMs, WriteTimestamp: nowMs,
	}}
	j.Apply(r)
	return r, nil
}

// Write is WriteShareGroupState: a ShareUpdate, or a ShareSnapshot of the
// merged state when k has none yet or UpdatesPerSnapshot updates were
// written since the last one. A stateEpoch other than the stored one is
// FENCED_STATE_EPOCH (the group was reset or deleted meanwhile), a leader
// epoch below the stored one FENCED_LEADER_EPOCH (a stale leader).
func (j *Journal) Write(k Key, stateEpoch, leaderEpoch int32, u Update, nowMs int64) (Record, error) {
	e, ok := j.m[k]
	if ok {
		if stateEpoch != e.state.StateEpoch {
			return Record{}, kerr.FencedStateEpoch
		}
		if leaderEpoch < e.state.LeaderEpoch {
			return Record{}, kerr.FencedLeaderEpoch
		}
	}
	per := j.UpdatesPerSnapshot
	switch {
	case per == 0:
		per = DefaultUpdatesPerSnapshot
	case per < 0:
		per = 0
	}
	var r Record
	if !ok || e.updates >= per {
		st := PersistedState{StateEpoch: stateEpoch, StartOffset: u.StartOffset}
		create := nowMs
		if ok {
			st = e.state
			st.Batches = append([]StateBatch(nil), st.Batches...)
			st.SnapshotEpoch++
			create = e.createTime
		}
		st.LeaderEpoch = leaderEpoch
		st.Apply(u)
		r = Record{Type: SnapshotRecord, Key: k, Snapshot: &SnapshotValue{
			SnapshotEpoch: st.SnapshotEpoch, StateEpoch: st.StateEpoch, LeaderEpoch: st.LeaderEpoch,
			StartOffset: st.StartOffset, DeliveryCompleteCount: st.DeliveryCompleteCount,
			CreateTimestamp: create, WriteTimestamp: nowMs, StateBatches: st.Batches,
		}}
	} else {
		r = Record{Type: UpdateRecord, Key: k, Update: &UpdateValue{
			SnapshotEpoch: e.state.SnapshotEpoch, LeaderEpoch: leaderEpoch, StartOffset: u.StartOffset,
			DeliveryCompleteCount: u.DeliveryCompleteCount, StateBatches: u.Batches,
		}}
	}
	j.Apply(r)
	return r, nil
}

// Delete is DeleteShareGroupState: tombstones for both record types of k.
func (j *Journal) Delete(k Key) []Record {
	recs := []Record{{Type: SnapshotRecord, Key: k}, {Type: UpdateRecord, Key: k}}
	for _, r := range recs {
		j.Apply(r)
	}
	return recs
}

// Apply applies one record as replay does: a snapshot replaces the state,
// an update merges into it ([PersistedState.Apply]; an update of another
// snapshot epoch than the current one is ignored, as is one for a key with
// no snapshot), a tombstone deletes the key.
func (j *Journal) Apply(r Record) {
	if j.m == nil {
		j.m = make(map[Key]*journalEntry)
	}
	switch {
	case r.Tombstone():
		delete(j.m, r.Key)
	case r.Snapshot != nil:
		s := r.Snapshot
		j.m[r.Key] = &journalEntry{
			snapOffset: -1,
			state: PersistedState{
				SnapshotEpoch: s.SnapshotEpoch, StateEpoch: s.StateEpoch, LeaderEpoch: s.LeaderEpoch,
				StartOffset: s.StartOffset, DeliveryCompleteCount: s.DeliveryCompleteCount,
				Batches: combine(nil, s.StateBatches, s.StartOffset),
			},
			createTime: s.CreateTimestamp,
		}
	case r.Update != nil:
		e, ok := j.m[r.Key]
		if !ok || r.Update.SnapshotEpoch != e.state.SnapshotEpoch {
			return
		}
		u := r.Update
		if u.LeaderEpoch != -1 {
			e.state.LeaderEpoch = u.LeaderEpoch
		}
		e.state.Apply(Update{StartOffset: u.StartOffset, DeliveryCompleteCount: u.DeliveryCompleteCount, Batches: u.StateBatches})
		e.updates++
	}
}

// Placed tells the journal where the records it returned (and applied)
// landed in the log: recs appended in order from offset first. A snapshot
// among them becomes its key's current one for [Journal.LastRedundantOffset].
func (j *Journal) Placed(recs []Record, first int64) {
	for i, r := range recs {
		if r.Snapshot == nil || r.Tombstone() {
			continue
		}
		if e, ok := j.m[r.Key]; ok && e.snapOffset < 0 {
			e.snapOffset = first + int64(i)
		}
	}
}

// Saved is a key's journal entry as [Journal.Save] found it.
type Saved struct {
	k     Key
	e     journalEntry
	found bool
}

// Save returns k's entry for [Journal.Revert]: the undo of an operation
// whose records never reached the log.
func (j *Journal) Save(k Key) Saved {
	e, ok := j.m[k]
	if !ok {
		return Saved{k: k}
	}
	c := *e
	c.state.Batches = append([]StateBatch(nil), e.state.Batches...)
	return Saved{k: k, e: c, found: true}
}

// Revert puts back the entry s saved (or removes the key if it had none).
func (j *Journal) Revert(s Saved) {
	if !s.found {
		delete(j.m, s.k)
		return
	}
	e := s.e
	j.m[s.k] = &e
}

// LastRedundantOffset is the offset below which the log holds nothing
// the journal needs: the lowest offset of a key's current snapshot (the
// updates that follow a snapshot, and the records of deleted keys, are
// all above it or redundant). With no keys at all, every record is
// redundant (math.MaxInt64: the caller caps it at what is committed); ok
// is false while some key's snapshot offset is unknown. Kafka's
// ShareCoordinatorShard.lastRedundantOffset, which its coordinator prunes
// the log to (DeleteRecords) with cleanup.policy=delete: the updates are
// deltas under one key per share-partition, so compaction, which keeps a
// key's last record only, would lose all but the last of them.
func (j *Journal) LastRedundantOffset() (off int64, ok bool) {
	off = math.MaxInt64
	for _, e := range j.m {
		if e.snapOffset < 0 {
			return -1, false
		}
		off = min(off, e.snapOffset)
	}
	return off, true
}

// LogRecord is one record of a __share_group_state partition: its offset,
// key and value bytes (a nil value is a tombstone).
type LogRecord struct {
	Offset     int64
	Key, Value []byte
}

// Replay rebuilds a journal from __share_group_state records in log order.
// A record that does not decode is an error: the partition's log is
// corrupt or not ours.
func Replay(recs []LogRecord) (*Journal, error) {
	j := NewJournal()
	for _, lr := range recs {
		r, err := DecodeRecord(lr.Key, lr.Value)
		if err != nil {
			return nil, err
		}
		j.Apply(r)
		j.Placed([]Record{r}, lr.Offset)
	}
	return j, nil
}
