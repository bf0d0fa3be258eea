package raftlog

import (
	"errors"
	"log/slog"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/strata-io/strata/storage/vfs"
)

// Sentinel errors. The raft.Storage methods also return raft's own
// [raft.ErrCompacted], [raft.ErrUnavailable] and [raft.ErrSnapOutOfDate]
// with exactly the meaning raft gives them.
var (
	// ErrCorrupt is returned (wrapped, with the file and offset) by Open when
	// the log cannot be recovered without losing data that may have been
	// acknowledged: damage before the tail of the last segment, a gap between
	// the snapshot and the WAL, or no usable snapshot where one is required.
	ErrCorrupt = errors.New("raftlog: corrupt")
	// ErrFailed is returned by Save, CreateSnapshot and Compact after any
	// earlier write, sync or rename failed: the storage latches into a failed
	// state (its on-disk state is unknown until it is reopened).
	ErrFailed = errors.New("raftlog: storage failed")
	// ErrClosed is returned by writers after Close.
	ErrClosed = errors.New("raftlog: closed")
	// ErrNonContiguous is returned by Save when the first entry given lies
	// beyond the last stored index + 1 (raft never does this).
	ErrNonContiguous = errors.New("raftlog: entries not contiguous with the log")
	// ErrUnsupportedVersion is returned by Open for a WAL segment or a
	// snapshot written in a format version this code does not know.
	ErrUnsupportedVersion = errors.New("raftlog: unsupported format version")
)

// Options configures [Open].
type Options struct {
	// FS is the file system; nil means vfs.Default.
	FS vfs.FS
	// Dir holds the log: metadata.log.dir/__cluster_metadata-0. It is
	// created if missing.
	Dir string
	// SegmentBytes is the size at which the WAL rolls to a new segment
	// file (default 64 MiB). A Save never spans two segments.
	SegmentBytes int64
	// KeepSnapshots is how many snapshot files are kept (default 2, minimum
	// 1). WAL segments are kept back to the oldest kept snapshot so that a
	// corrupt newest snapshot can fall back to an older one plus the WAL.
	KeepSnapshots int
	// Logger receives recovery reports; nil means slog.Default().
	Logger *slog.Logger
}

// RecoveryReport says what Open found and repaired. It is never silently
// empty when something was lost: every truncated byte and skipped file is
// listed.
type RecoveryReport struct {
	// Segments is the number of WAL segments replayed.
	Segments int
	// Entries is the number of entries in the log after recovery.
	Entries int
	// TruncatedSegment is the segment whose torn tail was cut ("" if none);
	// TruncatedAt is the offset it was cut to and TruncatedBytes how many
	// bytes were dropped (an incomplete Save that never returned).
	TruncatedSegment string
	TruncatedAt      int64
	TruncatedBytes   int64
	// RemovedSegments are trailing segments dropped whole because even
	// their header was torn.
	RemovedSegments []string
	// CorruptSnapshots are snapshot files that failed their checksum and
	// were renamed to *.corrupt; recovery fell back to an older one.
	CorruptSnapshots []string
	// RemovedTemp are *.tmp leftovers of interrupted snapshot writes.
	RemovedTemp []string
	// SnapshotIndex and SnapshotTerm identify the snapshot loaded (0 if none).
	SnapshotIndex, SnapshotTerm uint64
}

// Stats are counters for metrics. All sizes are bytes.
type Stats struct {
	FirstIndex, LastIndex uint64 // as raft sees them
	Entries               int    // entries held in memory
	EntryBytes            int64  // their encoded size
	WALBytes              int64  // bytes in all WAL segments
	Segments              int    // WAL segment files
	SnapshotIndex         uint64
	SnapshotTerm          uint64
	SnapshotBytes         int64     // size of the newest snapshot file
	SnapshotTime          time.Time // when it was written (zero if none)
	Saves                 uint64    // Save calls that wrote something
	Syncs                 uint64    // file fsyncs issued by Save
	LastSaveDuration      time.Duration
}

// Storage is raft's durable log. It implements [raft.Storage]; all methods
// are safe for concurrent use (readers are never blocked by an fsync in
// progress). Entries since the last compaction are held in memory, like
// [raft.MemoryStorage]: returned entries are shared and must not be
// mutated; returned slices are the caller's (appending to them copies).
type Storage struct {
	// implementation follows
	o Options
}

var _ raft.Storage = (*Storage)(nil)

// Open recovers the log in o.Dir: it removes *.tmp leftovers, loads the
// newest valid snapshot (falling back to an older one if the newest is
// corrupt), replays every WAL segment honouring overwritten suffixes, and
// truncates a torn tail of the last segment. What it repaired is in
// [Storage.Recovery] and logged. Returns ErrCorrupt (wrapped) when data
// that may have been acknowledged is damaged.
func Open(o Options) (*Storage, error) {
	return nil, errors.New("raftlog: not implemented yet")
}

// Recovery reports what Open found and repaired.
func (s *Storage) Recovery() RecoveryReport { return RecoveryReport{} }

// InitialState implements raft.Storage.
func (s *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	return nil, nil, nil
}

// Entries implements raft.Storage.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) { return nil, nil }

// Term implements raft.Storage.
func (s *Storage) Term(i uint64) (uint64, error) { return 0, nil }

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) { return 0, nil }

// FirstIndex implements raft.Storage.
func (s *Storage) FirstIndex() (uint64, error) { return 0, nil }

// Snapshot implements raft.Storage.
func (s *Storage) Snapshot() (*pb.Snapshot, error) { return nil, nil }

// Save persists, in this order, snap (if non-empty) then ents (replacing
// any conflicting suffix) then hs (if non-nil), in one WAL write and one
// fsync; it returns only once all of it is durable. This is the Ready
// loop's "persist" step: call it with rd.HardState, rd.Entries,
// rd.Snapshot before sending rd.Messages.
func (s *Storage) Save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot) error {
	return nil
}

// CreateSnapshot durably writes a snapshot at index (an applied index)
// with the given ConfState and state-machine data, and makes it the one
// Snapshot returns. Returns raft.ErrSnapOutOfDate if index is not newer
// than the current snapshot.
func (s *Storage) CreateSnapshot(index uint64, cs *pb.ConfState, data []byte) (*pb.Snapshot, error) {
	return nil, nil
}

// Compact discards entries up to and including index from memory (the
// entry at index is kept as the term-only dummy, as raft.MemoryStorage
// does) and deletes WAL segments whose entries are all at or below both
// index and the oldest kept snapshot. Returns raft.ErrCompacted if index
// is already compacted.
func (s *Storage) Compact(index uint64) error { return nil }

// Close releases the open segment. Further writes return ErrClosed.
func (s *Storage) Close() error { return nil }

// Stats returns counters for metrics.
func (s *Storage) Stats() Stats { return Stats{} }
