package raftlog

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strata-io/strata/storage/vfs"
)

const testDir = "/raft/__cluster_metadata-0"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func ent(index, term uint64, data string) *pb.Entry {
	e := &pb.Entry{Index: proto.Uint64(index), Term: proto.Uint64(term), Type: pb.EntryNormal.Enum()}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

func hardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: proto.Uint64(term), Vote: proto.Uint64(vote), Commit: proto.Uint64(commit)}
}

func leaderSnap(index, term uint64, data string) *pb.Snapshot {
	return pb.EnsureSnapshot(&pb.Snapshot{
		Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(index), Term: proto.Uint64(term),
			ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}},
		Data: []byte(data),
	})
}

func openMem(t testing.TB, fs vfs.FS, o Options) *Storage {
	t.Helper()
	o.FS, o.Logger = fs, quiet
	if o.Dir == "" {
		o.Dir = testDir
	}
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func mustSave(t testing.TB, s *Storage, hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot) {
	t.Helper()
	if err := s.Save(hs, ents, snap); err != nil {
		t.Fatalf("Save: %v", err)
	}
}

// model is the logical log the operations should produce, never
// compacted: what a reopened Storage must serve.
type model struct {
	base, baseTerm uint64      // the log starts after (base, baseTerm)
	ents           []*pb.Entry // base+1 ...
	hs             *pb.HardState
	snaps          map[uint64]*pb.Snapshot // every snapshot ever made durable
	snapIdx        uint64                  // newest
	compacted      uint64                  // in-memory compaction point
}

func newModel() *model { return &model{snaps: map[uint64]*pb.Snapshot{}} }

func (m *model) clone() *model {
	c := *m
	c.ents = append([]*pb.Entry(nil), m.ents...)
	c.snaps = make(map[uint64]*pb.Snapshot, len(m.snaps))
	for k, v := range m.snaps {
		c.snaps[k] = v
	}
	return &c
}

func (m *model) last() uint64 { return m.base + uint64(len(m.ents)) }

func (m *model) term(i uint64) uint64 {
	if i == m.base {
		return m.baseTerm
	}
	return m.ents[i-m.base-1].GetTerm()
}

func (m *model) save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot) {
	if snap != nil && !raft.IsEmptySnap(snap) {
		md := snap.GetMetadata()
		m.base, m.baseTerm, m.ents = md.GetIndex(), md.GetTerm(), nil
		m.snaps[md.GetIndex()], m.snapIdx = snap, md.GetIndex()
		m.compacted = md.GetIndex()
	}
	for _, e := range ents {
		if e.GetIndex() <= m.base {
			continue
		}
		m.ents = append(m.ents[:e.GetIndex()-m.base-1], e)
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		m.hs = hs
	}
}

// check compares a Storage opened from disk with the model: same snapshot
// as one the model made, the log right after it, same last index and
// hard state (commit raised to the snapshot).
func (m *model) check(s *Storage) error {
	snap, _ := s.Snapshot()
	si := snap.GetMetadata().GetIndex()
	if si != 0 {
		want, ok := m.snaps[si]
		if !ok {
			return fmt.Errorf("recovered snapshot %d the model never made", si)
		}
		if !proto.Equal(want.GetMetadata(), snap.GetMetadata()) || !bytes.Equal(want.GetData(), snap.GetData()) {
			return fmt.Errorf("snapshot %d differs", si)
		}
	} else if m.base != 0 {
		return fmt.Errorf("no snapshot recovered but the log was reset to %d", m.base)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != si+1 {
		return fmt.Errorf("first index %d, snapshot %d", first, si)
	}
	if last != m.last() {
		return fmt.Errorf("last index %d, want %d", last, m.last())
	}
	if si < m.base {
		return fmt.Errorf("snapshot %d older than the log reset at %d", si, m.base)
	}
	if t, err := s.Term(si); err != nil || t != m.term(si) {
		return fmt.Errorf("term(%d) = %d, %v; want %d", si, t, err, m.term(si))
	}
	if last > si {
		got, err := s.Entries(si+1, last+1, ^uint64(0))
		if err != nil {
			return fmt.Errorf("entries: %v", err)
		}
		for k, e := range got {
			if want := m.ents[si+uint64(k)-m.base]; !proto.Equal(e, want) {
				return fmt.Errorf("entry %d = %v, want %v", si+1+uint64(k), e, want)
			}
		}
	}
	hs, _, _ := s.InitialState()
	want := expectHardState(m.hs, si, snap.GetMetadata().GetTerm())
	if !proto.Equal(hs, want) {
		return fmt.Errorf("hard state %v, want %v", hs, want)
	}
	return nil
}

// expectHardState is the hard state a reopened Storage reports, given the
// last one saved and the snapshot it loaded (see recoveredHardState).
func expectHardState(hs *pb.HardState, si, st uint64) *pb.HardState {
	if hs == nil && si == 0 {
		return nil
	}
	term, vote := hs.GetTerm(), hs.GetVote()
	if term < st {
		term, vote = st, 0
	}
	return hardState(term, vote, max(hs.GetCommit(), si))
}

// op is one operation on a Storage.
type op struct {
	kind  string // "save", "snapshot", "compact"
	hs    *pb.HardState
	ents  []*pb.Entry
	snap  *pb.Snapshot
	index uint64
	cs    *pb.ConfState
	data  []byte
}

func (o op) String() string {
	switch o.kind {
	case "save":
		s := fmt.Sprintf("save %d entries", len(o.ents))
		if len(o.ents) > 0 {
			s += fmt.Sprintf(" from %d", o.ents[0].GetIndex())
		}
		if o.snap != nil {
			s += fmt.Sprintf(" after leader snapshot %d", o.snap.GetMetadata().GetIndex())
		}
		return s
	default:
		return fmt.Sprintf("%s %d", o.kind, o.index)
	}
}

// apply runs o on s.
func (o op) apply(s *Storage) error {
	switch o.kind {
	case "save":
		return s.Save(o.hs, o.ents, o.snap)
	case "snapshot":
		_, err := s.CreateSnapshot(o.index, o.cs, o.data)
		return err
	case "compact":
		return s.Compact(o.index)
	}
	panic(o.kind)
}

// applyMem runs o on raft's reference implementation.
func (o op) applyMem(ms *raft.MemoryStorage) error {
	switch o.kind {
	case "save":
		if o.snap != nil {
			if err := ms.ApplySnapshot(o.snap); err != nil {
				return err
			}
		}
		if err := ms.Append(o.ents); err != nil {
			return err
		}
		if o.hs != nil {
			return ms.SetHardState(o.hs)
		}
		return nil
	case "snapshot":
		_, err := ms.CreateSnapshot(o.index, o.cs, o.data)
		return err
	case "compact":
		return ms.Compact(o.index)
	}
	panic(o.kind)
}

// record updates the model for o.
func (m *model) record(o op) {
	switch o.kind {
	case "save":
		m.save(o.hs, o.ents, o.snap)
	case "snapshot":
		// Built from the op, not read back from s: the op may have failed
		// after its file became durable.
		m.snaps[o.index] = &pb.Snapshot{
			Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(o.index), Term: proto.Uint64(m.term(o.index)),
				ConfState: pb.EnsureConfState(proto.Clone(o.cs).(*pb.ConfState))},
			Data: o.data,
		}
		m.snapIdx = o.index
	case "compact":
		m.compacted = o.index
	}
}

// driver generates random raft-like operations. They follow raft's rules:
// overwrites only above the commit index, snapshots and compaction only at
// or below it.
type driver struct {
	rng      *rand.Rand
	term     uint64
	commit   uint64
	noSnaps  bool // only entry and hard-state saves
	nextData int
}

func (d *driver) data() string {
	d.nextData++
	n := d.rng.IntN(300)
	return fmt.Sprintf("%06d%s", d.nextData, bytes.Repeat([]byte{byte('a' + d.nextData%26)}, n))
}

// next returns an operation valid for the state m describes.
func (d *driver) next(m *model) op {
	for {
		r := d.rng.IntN(100)
		switch {
		case r < 60 || d.noSnaps:
			return d.save(m)
		case r < 75: // snapshot at a committed index
			lo := max(m.snapIdx, m.compacted) + 1
			if d.commit < lo {
				continue
			}
			i := lo + d.rng.Uint64N(d.commit-lo+1)
			return op{kind: "snapshot", index: i, cs: &pb.ConfState{Voters: []uint64{1}}, data: []byte(d.data())}
		case r < 88: // compact at or below the newest snapshot
			if m.snapIdx <= m.compacted {
				continue
			}
			return op{kind: "compact", index: m.compacted + 1 + d.rng.Uint64N(m.snapIdx-m.compacted)}
		default: // a snapshot from the leader, past our commit index
			d.term++
			i := max(m.snapIdx, d.commit) + 1 + d.rng.Uint64N(8)
			d.commit = i
			return op{kind: "save", snap: leaderSnap(i, d.term, d.data()),
				ents: []*pb.Entry{ent(i+1, d.term, d.data())}, hs: hardState(d.term, 2, i)}
		}
	}
}

// save appends, sometimes overwriting an uncommitted suffix.
func (d *driver) save(m *model) op {
	from := m.last() + 1
	if m.last() > d.commit && d.rng.IntN(4) == 0 {
		from = d.commit + 1 + d.rng.Uint64N(m.last()-d.commit)
		d.term++
	}
	if d.rng.IntN(10) == 0 || d.term == 0 {
		d.term++
	}
	var ents []*pb.Entry
	for i := range d.rng.IntN(6) {
		ents = append(ents, ent(from+uint64(i), d.term, d.data()))
	}
	last := m.last()
	if len(ents) > 0 {
		last = from + uint64(len(ents)) - 1
	}
	if d.rng.IntN(2) == 0 && last > d.commit {
		d.commit += d.rng.Uint64N(last-d.commit) + 1
	}
	var hs *pb.HardState
	if d.rng.IntN(3) > 0 || len(ents) == 0 {
		hs = hardState(d.term, d.rng.Uint64N(3)+1, d.commit)
	}
	return op{kind: "save", hs: hs, ents: ents}
}

// reopened updates the model for a Storage just reopened: in memory, the
// log now starts at the snapshot.
func (m *model) reopened(s *Storage) {
	snap, _ := s.Snapshot()
	m.compacted = snap.GetMetadata().GetIndex()
}

type pbEntry = pb.Entry

func listNames(t testing.TB, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}
