package share

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Persister is the seam between a share-partition leader and the share
// coordinator (Kafka's Persister). The leader's shell calls Initialize when
// a group first reads a partition with no durable state, Read when it
// becomes the share-partition's leader (then [Restore]), Write with each
// [Partition.TakeUpdate], and Delete when a group's offsets are deleted.
// The broker's implementation sends the share-state RPCs
// (InitializeShareGroupState 83, ReadShareGroupState 84,
// WriteShareGroupState 85, DeleteShareGroupState 86,
// ReadShareGroupStateSummary 87) to the coordinator of the key's
// __share_group_state partition; [MemPersister] is the same contract over
// a [Journal] in memory, for tests of the leader side.
//
// Errors are Kafka's (kerr): ErrNoState when a key has no state (Read and
// Summary; the caller initializes), kerr.FencedStateEpoch /
// kerr.FencedLeaderEpoch from Write, kerr.CoordinatorNotAvailable /
// kerr.NotCoordinator / kerr.CoordinatorLoadInProgress while the
// coordinator moves (retriable: the caller retries with backoff).
type Persister interface {
	Initialize(ctx context.Context, k Key, stateEpoch int32, startOffset int64) error
	Read(ctx context.Context, k Key, leaderEpoch int32) (PersistedState, error)
	Write(ctx context.Context, k Key, stateEpoch, leaderEpoch int32, u Update) error
	Delete(ctx context.Context, k Key) error
	// Summary is ReadShareGroupStateSummary: the state without batches
	// (StartOffset, StateEpoch, LeaderEpoch, DeliveryCompleteCount), as
	// DescribeShareGroupOffsets answers it.
	Summary(ctx context.Context, k Key) (PersistedState, error)
}

// ErrNoState is returned by Read and Summary for a key with no durable
// state.
var ErrNoState = errors.New("share: no state for the share-partition")

// MemPersister is a Persister over one in-memory Journal. Safe for
// concurrent use.
type MemPersister struct {
	mu sync.Mutex
	j  *Journal
	// Now returns the time in ms (time.Now when nil).
	Now func() int64
}

// NewMemPersister returns an empty MemPersister.
func NewMemPersister() *MemPersister { return &MemPersister{j: NewJournal()} }

func (m *MemPersister) now() int64 {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now().UnixMilli()
}

// Initialize implements Persister.
func (m *MemPersister) Initialize(_ context.Context, k Key, stateEpoch int32, startOffset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.j.Initialize(k, stateEpoch, startOffset, m.now())
	return err
}

// Read implements Persister. A leader epoch above the stored one is
// recorded, as Kafka's ReadShareGroupState does.
func (m *MemPersister) Read(_ context.Context, k Key, leaderEpoch int32) (PersistedState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.j.State(k)
	if !ok {
		return PersistedState{}, ErrNoState
	}
	if leaderEpoch > st.LeaderEpoch {
		if _, err := m.j.Write(k, st.StateEpoch, leaderEpoch, Update{StartOffset: -1, DeliveryCompleteCount: st.DeliveryCompleteCount}, m.now()); err != nil {
			return PersistedState{}, err
		}
		st.LeaderEpoch = leaderEpoch
	}
	return st, nil
}

// Write implements Persister.
func (m *MemPersister) Write(_ context.Context, k Key, stateEpoch, leaderEpoch int32, u Update) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.j.Write(k, stateEpoch, leaderEpoch, u, m.now())
	return err
}

// Delete implements Persister.
func (m *MemPersister) Delete(_ context.Context, k Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.j.Delete(k)
	return nil
}

// Summary implements Persister.
func (m *MemPersister) Summary(_ context.Context, k Key) (PersistedState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.j.State(k)
	if !ok {
		return PersistedState{}, ErrNoState
	}
	st.Batches = nil
	return st, nil
}
