package raftlog

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strata-io/strata/storage/vfs"
)

const (
	defaultSegmentBytes  = 64 << 20
	defaultKeepSnapshots = 2
)

// Open recovers the log in o.Dir (creating the directory if needed) and
// returns it ready for raft. Recovery, in order:
//
//  1. *.tmp leftovers of interrupted snapshot writes are removed.
//  2. The newest snapshot whose checksum holds is loaded; newer ones that
//     fail are renamed *.corrupt and reported (an older snapshot plus the
//     WAL, which is kept back to the oldest kept snapshot, rebuilds the
//     same log).
//  3. Every WAL segment is replayed in order, each Save's batch applied
//     with the same rules as at run time (a snapshot reset replaces the
//     log; entries replace any suffix from their first index).
//  4. Damage in the last segment with nothing valid after it is a torn
//     tail: a Save that never returned. It is cut off (a segment whose
//     header itself is torn is removed) and reported. Damage anywhere else,
//     or followed by a valid frame, means acknowledged data is gone:
//     ErrCorrupt.
//  5. The log is cut to start right after the loaded snapshot, so
//     FirstIndex()-1 is the snapshot's index (raft's initial applied
//     index). Entries after it that contradict the snapshot's term are from
//     a stale branch that the snapshot superseded and are dropped.
//
// What was repaired is in [Storage.Recovery] and logged at Warn.
func Open(o Options) (*Storage, error) {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = defaultSegmentBytes
	}
	if o.KeepSnapshots <= 0 {
		o.KeepSnapshots = defaultKeepSnapshots
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Dir == "" {
		return nil, errors.New("raftlog: Options.Dir is required")
	}
	s := &Storage{fs: o.FS, dir: o.Dir, segBytes: o.SegmentBytes, keep: o.KeepSnapshots, logger: o.Logger}
	if err := s.recover(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Storage) recover() error {
	fs, dir := s.fs, s.dir
	if err := mkdirDurable(fs, dir); err != nil {
		return err
	}
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("raftlog: list %s: %w", dir, err)
	}
	var rep RecoveryReport
	var walNames []string
	dirty := false
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, tmpSuffix):
			if err := fs.Remove(joinDir(dir, n)); err != nil {
				return fmt.Errorf("raftlog: remove %s: %w", n, err)
			}
			rep.RemovedTemp = append(rep.RemovedTemp, n)
			dirty = true
		case strings.HasSuffix(n, snapSuffix):
			t, i, ok := parseSnapName(n)
			if !ok {
				continue
			}
			si := snapInfo{name: n, term: t, index: i}
			if fi, err := fs.Stat(joinDir(dir, n)); err == nil {
				si.size, si.time = fi.Size(), fi.ModTime()
			}
			s.snaps = append(s.snaps, si)
		case strings.HasSuffix(n, walSuffix):
			if _, ok := parseWALName(n); ok {
				walNames = append(walNames, n) // List is sorted: index order
			}
		}
	}
	slices.SortFunc(s.snaps, cmpSnap)

	// The newest snapshot that reads back whole.
	snap := pb.EnsureSnapshot(nil)
	var loaded snapInfo
	for len(s.snaps) > 0 {
		si := s.snaps[len(s.snaps)-1]
		got, err := readSnapshotFile(fs, dir, si)
		if err == nil {
			snap, loaded = got, si
			break
		}
		if !errors.Is(err, ErrCorrupt) {
			return err // unreadable or a newer format: refuse rather than fall back
		}
		s.logger.Warn("raftlog: corrupt snapshot, falling back to an older one", "file", si.name, "err", err)
		if err := fs.Rename(joinDir(dir, si.name), joinDir(dir, si.name+corruptSuffix)); err != nil {
			return fmt.Errorf("raftlog: rename %s: %w", si.name, err)
		}
		rep.CorruptSnapshots = append(rep.CorruptSnapshots, si.name)
		s.snaps = s.snaps[:len(s.snaps)-1]
		dirty = true
	}
	if dirty {
		if err := fs.SyncDir(dir); err != nil {
			return fmt.Errorf("raftlog: sync dir %s: %w", dir, err)
		}
	}
	snapI, snapT := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()

	// Replay the WAL.
	var r replayer
	for i, n := range walNames {
		last := i == len(walNames)-1
		b, err := readFile(fs, joinDir(dir, n))
		if err != nil {
			return fmt.Errorf("raftlog: read %s: %w", n, err)
		}
		end, err := r.segment(n, b)
		if err != nil {
			return err
		}
		if end == len(b) {
			continue
		}
		// Damage at end. Only the tail of the last segment may be torn: every
		// earlier byte was fsynced by a Save that returned.
		if !last {
			return fmt.Errorf("%w: %s: bad frame at offset %d of %d in a sealed segment", ErrCorrupt, n, end, len(b))
		}
		if at, ok := findFrame(b, end+1); ok {
			return fmt.Errorf("%w: %s: bad frame at offset %d but a valid frame follows at %d: acknowledged data is damaged", ErrCorrupt, n, end, at)
		}
		if end == 0 {
			// Not even the header survived: the Save that created this
			// segment never returned.
			if err := fs.Remove(joinDir(dir, n)); err != nil {
				return fmt.Errorf("raftlog: remove %s: %w", n, err)
			}
			if err := fs.SyncDir(dir); err != nil {
				return fmt.Errorf("raftlog: sync dir %s: %w", dir, err)
			}
			rep.RemovedSegments = append(rep.RemovedSegments, n)
			s.logger.Warn("raftlog: removed torn segment", "file", n, "bytes", len(b))
			continue
		}
		if err := truncateFile(fs, joinDir(dir, n), int64(end)); err != nil {
			return err
		}
		rep.TruncatedSegment, rep.TruncatedAt, rep.TruncatedBytes = n, int64(end), int64(len(b)-end)
		r.segs[len(r.segs)-1].size = int64(end)
		s.logger.Warn("raftlog: truncated torn WAL tail", "file", n, "offset", end, "bytes", len(b)-end)
	}
	s.segs = r.segs
	rep.Segments = len(r.segs)

	// Start the log right after the snapshot.
	ml, dropped, err := r.reconcile(snapI, snapT)
	if err != nil {
		return err
	}
	rep.DroppedEntries = dropped
	if dropped > 0 {
		s.logger.Warn("raftlog: dropped entries of a branch the snapshot superseded", "after", snapI, "entries", dropped)
	}
	hs, err := recoveredHardState(r.hs, snapI, snapT, ml.lastIndex())
	if err != nil {
		return err
	}

	if n := len(s.segs); n > 0 {
		f, err := fs.OpenReadWrite(joinDir(dir, s.segs[n-1].name))
		if err != nil {
			return fmt.Errorf("raftlog: open %s: %w", s.segs[n-1].name, err)
		}
		s.f = f
	}
	rep.Entries = len(ml.ents) - 1
	rep.SnapshotIndex, rep.SnapshotTerm = snapI, snapT
	s.ml, s.hs, s.snap, s.report = ml, hs, snap, rep
	s.st.SnapshotBytes, s.st.SnapshotTime = loaded.size, loaded.time
	s.segStatsLocked()
	s.logger.Info("raftlog: recovered", "dir", dir, "segments", rep.Segments, "snapshot", snapI,
		"first", ml.firstIndex(), "last", ml.lastIndex(), "commit", hs.GetCommit())
	return nil
}

func truncateFile(fs vfs.FS, name string, size int64) error {
	f, err := fs.OpenReadWrite(name)
	if err != nil {
		return fmt.Errorf("raftlog: open %s: %w", name, err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("raftlog: truncate %s: %w", name, err)
	}
	return nil
}

// replayer rebuilds the log from WAL segments.
type replayer struct {
	// ml is nil until the first entries or snapshot reset. Until a reset
	// anchors it, its dummy is just "the index before the first entry
	// replayed" with an unknown term (older segments were compacted away).
	ml       *memLog
	anchored bool
	hs       *pb.HardState
	segs     []*segment
}

// segment replays one segment's bytes and returns the offset where valid
// frames end (len(b) if all are valid). A frame that checksums but does
// not decode is corruption, returned as an error.
func (r *replayer) segment(name string, b []byte) (int, error) {
	first, _ := parseWALName(name)
	typ, p, pos, err := readFrame(b, 0)
	if err != nil {
		return 0, nil // torn header: the caller decides
	}
	if typ != recHeader {
		return 0, fmt.Errorf("%w: %s does not start with a header", ErrCorrupt, name)
	}
	hf, err := parseHeader(p)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if hf != first {
		return 0, fmt.Errorf("%w: %s: header says first index %d", ErrCorrupt, name, hf)
	}
	r.segs = append(r.segs, &segment{name: name, first: first, size: int64(len(b))})
	for pos < len(b) {
		typ, p, next, err := readFrame(b, pos)
		if err != nil {
			return pos, nil
		}
		if typ != recBatch {
			return 0, fmt.Errorf("%w: %s: frame type %d at offset %d", ErrCorrupt, name, typ, pos)
		}
		bt, err := decodeBatch(p)
		if err == nil {
			err = r.apply(bt)
		}
		if err != nil {
			return 0, fmt.Errorf("%s at offset %d: %w", name, pos, err)
		}
		pos = next
	}
	return pos, nil
}

func (r *replayer) apply(b batch) error {
	if len(b.hs) > 0 {
		r.hs = b.hs[len(b.hs)-1]
	}
	if b.snap {
		r.ml, r.anchored = newMemLog(b.snapIdx, b.snapTrm), true
		noteReset(r.segs, b.snapIdx)
	}
	if len(b.ents) == 0 {
		return nil
	}
	e0 := b.ents[0].GetIndex()
	if e0 == 0 {
		return fmt.Errorf("%w: entry with index 0", ErrCorrupt)
	}
	if r.ml == nil || (!r.anchored && e0 <= r.ml.dummyIndex()) {
		// Nothing known below e0 yet, or this batch replaces everything
		// from below where the surviving segments start.
		r.ml, r.anchored = newMemLog(e0-1, 0), false
	}
	ents, err := r.ml.trimAppend(b.ents)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	r.ml.append(ents)
	if len(ents) > 0 {
		noteAppend(r.segs, ents[0].GetIndex(), ents[len(ents)-1].GetIndex())
	}
	return nil
}

// reconcile cuts the replayed log to start right after the snapshot
// (snapI, snapT) and returns how many replayed entries after snapI had to
// be dropped because they contradict the snapshot.
func (r *replayer) reconcile(snapI, snapT uint64) (*memLog, int, error) {
	ml := r.ml
	switch {
	case ml == nil:
		return newMemLog(snapI, snapT), 0, nil
	case ml.dummyIndex() > snapI:
		if snapI == 0 {
			return nil, 0, fmt.Errorf("%w: the WAL starts after index %d and there is no snapshot", ErrCorrupt, ml.dummyIndex())
		}
		return nil, 0, fmt.Errorf("%w: the WAL starts after index %d but the snapshot is at %d", ErrCorrupt, ml.dummyIndex(), snapI)
	case snapI > ml.lastIndex():
		// The snapshot is ahead of every entry: a snapshot from the leader
		// whose WAL reset record was cut off, or plain compaction.
		return newMemLog(snapI, snapT), 0, nil
	case snapI == ml.dummyIndex() && !r.anchored:
		ml.ents[0] = dummyEntry(snapI, snapT)
		return ml, 0, nil
	}
	if t, _ := ml.term(snapI); t != snapT {
		return newMemLog(snapI, snapT), int(ml.lastIndex() - snapI), nil
	}
	if snapI > ml.dummyIndex() {
		if err := ml.compact(snapI); err != nil {
			return nil, 0, err
		}
	}
	return ml, 0, nil
}

// mkdirDurable creates dir and any missing parents, and fsyncs the parent
// of each directory it created: a new directory's own entry is not durable
// until its parent is synced, and a WAL in a directory that vanishes after
// a crash is no WAL.
func mkdirDurable(fs vfs.FS, dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("raftlog: mkdir %s: %w", dir, err)
	}
	for _, d := range created {
		if p := filepath.Dir(d); p != d {
			if err := fs.SyncDir(p); err != nil {
				return fmt.Errorf("raftlog: sync dir %s: %w", p, err)
			}
		}
	}
	return nil
}

// recoveredHardState reconciles the last hard state in the WAL with the
// snapshot loaded. A Save that installed a leader's snapshot writes the
// snapshot file before its WAL batch; if a crash fell between the two, the
// hard state on disk predates the snapshot, so:
//   - commit is raised to the snapshot's index (a snapshot holds only
//     committed state; raft refuses a commit below its first index);
//   - term is raised to the snapshot's term, with no vote: this node never
//     voted in that term (a vote is sent only after the hard state that
//     records it is durable), and a term below the log's last term would
//     let it campaign in a term older than entries it holds.
//
// A commit index past the last entry is corruption.
func recoveredHardState(hs *pb.HardState, snapI, snapT, last uint64) (*pb.HardState, error) {
	if hs == nil && snapI == 0 {
		return nil, nil
	}
	if hs.GetCommit() > last {
		return nil, fmt.Errorf("%w: hard state commit %d beyond last index %d", ErrCorrupt, hs.GetCommit(), last)
	}
	out := &pb.HardState{Term: proto.Uint64(hs.GetTerm()), Vote: proto.Uint64(hs.GetVote()), Commit: proto.Uint64(max(hs.GetCommit(), snapI))}
	if hs.GetTerm() < snapT {
		out.Term, out.Vote = proto.Uint64(snapT), proto.Uint64(0)
	}
	return out, nil
}
