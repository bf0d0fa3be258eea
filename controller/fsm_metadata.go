package controller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/strata-io/strata/controller/metadata"
)

// Metadata offsets. A Raft entry carries a batch of records; the record at
// position i of the entry at log index idx has the metadata offset
//
//	offset = idx * RecordsPerEntry + i
//
// so offsets only grow, each record has its own (as metadata.State.Apply
// requires), and the entry holding an offset is found without an index:
// idx = offset / RecordsPerEntry. Offsets are sparse, as Kafka's are after
// compaction; brokers treat them as ordered opaque numbers.
const RecordsPerEntry = 1_000_000

// OffsetOf returns the metadata offset of record i of the entry at index.
func OffsetOf(index uint64, i int) int64 { return int64(index)*RecordsPerEntry + int64(i) }

// IndexOf returns the Raft index of the entry holding offset.
func IndexOf(offset int64) uint64 {
	if offset < 0 {
		return 0
	}
	return uint64(offset / RecordsPerEntry)
}

// A batch is the FSM payload of one entry:
//
//	+----------------+------------------+-----------------------+-----
//	| count uvarint  | len_0 uvarint    | metadata.Encode(r_0)  | ...
//	+----------------+------------------+-----------------------+-----
//
// Format migration: a batch has no version of its own; the entry header
// (entry.go) carries one, and each record carries its own.

func encodeBatch(recs []metadata.Record) []byte {
	b := binary.AppendUvarint(make([]byte, 0, 64*len(recs)+8), uint64(len(recs)))
	for _, r := range recs {
		e := metadata.Encode(r)
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// decodeBatch never panics; bad bytes are ErrCorruptEntry.
func decodeBatch(b []byte) ([]metadata.Record, error) {
	if len(b) == 0 {
		return nil, nil
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > RecordsPerEntry || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad record count", ErrCorruptEntry)
	}
	b = b[k:]
	recs := make([]metadata.Record, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: bad record length", ErrCorruptEntry)
		}
		r, err := metadata.Decode(b[k : k+int(l)])
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorruptEntry, err)
		}
		recs = append(recs, r)
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrCorruptEntry, len(b))
	}
	return recs, nil
}

// metadataFSM is the [FSM] over metadata.State. The Ready loop applies
// under mu's write lock; planners and readers take the read lock.
type metadataFSM struct {
	logger *slog.Logger
	// mu guards st. Lock order: Controller.decide → metadataFSM.mu.
	mu sync.RWMutex
	st *metadata.State
	// rejected counts records Apply refused (inconsistent with the state);
	// they are skipped identically on every replica.
	rejected int
}

func newMetadataFSM(l *slog.Logger) *metadataFSM {
	return &metadataFSM{logger: l, st: metadata.NewState()}
}

// Apply implements FSM.
func (f *metadataFSM) Apply(index uint64, data []byte) error {
	recs, err := decodeBatch(data)
	if err != nil {
		return fmt.Errorf("entry %d: %w", index, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range recs {
		off := OffsetOf(index, i)
		if err := f.st.Apply(off, r); err != nil {
			if errors.Is(err, metadata.ErrOffsetRegression) {
				continue // replayed below a restored snapshot
			}
			// Deterministic on every replica: the same state refuses the
			// same record. Plans are made on the leader's current state,
			// so this only happens to raw proposals.
			f.rejected++
			f.logger.Warn("controller: record refused by the metadata state", "offset", off, "type", r.Type(), "err", err)
		}
	}
	// Entries without records (a new leader's empty entry, conf changes)
	// and refused tails still move the image's offset to the entry.
	if last := OffsetOf(index, max(len(recs)-1, 0)); f.st.Offset() < last {
		if err := f.st.AdvanceTo(last); err != nil {
			return err
		}
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
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
	return nil
}

// read runs fn with the state read-locked. fn must not keep st.
func (f *metadataFSM) read(fn func(st *metadata.State)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.st)
}
