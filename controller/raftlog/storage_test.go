package raftlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strata-io/strata/storage/vfs"
)

// compareWithMemoryStorage checks that every raft.Storage method of s
// answers exactly as raft's reference MemoryStorage does, errors included.
func compareWithMemoryStorage(t *testing.T, rng *rand.Rand, s *Storage, ms *raft.MemoryStorage, when string) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: %s", when, fmt.Sprintf(format, args...))
	}
	f1, _ := s.FirstIndex()
	f2, _ := ms.FirstIndex()
	l1, _ := s.LastIndex()
	l2, _ := ms.LastIndex()
	if f1 != f2 || l1 != l2 {
		fail("first/last %d/%d, MemoryStorage %d/%d", f1, l1, f2, l2)
	}
	for i := max(f1, 2) - 2; i <= l1+1; i++ {
		t1, e1 := s.Term(i)
		t2, e2 := ms.Term(i)
		if t1 != t2 || !errors.Is(e1, e2) && !(e1 == nil && e2 == nil) {
			fail("Term(%d) = %d, %v; MemoryStorage %d, %v", i, t1, e1, t2, e2)
		}
	}
	sizes := []uint64{0, 1, 250, 1000, 4000, ^uint64(0)}
	for range 8 {
		lo := f1 - 1 + rng.Uint64N(l1-f1+2)
		hi := lo + rng.Uint64N(l1+2-lo)
		max := sizes[rng.IntN(len(sizes))]
		if lo == 0 {
			lo = 1
		}
		if hi < lo {
			hi = lo
		}
		a, e1 := s.Entries(lo, hi, max)
		b, e2 := ms.Entries(lo, hi, max)
		if !errors.Is(e1, e2) && !(e1 == nil && e2 == nil) || len(a) != len(b) {
			fail("Entries(%d, %d, %d) = %d entries, %v; MemoryStorage %d, %v", lo, hi, max, len(a), e1, len(b), e2)
		}
		for k := range a {
			if !proto.Equal(a[k], b[k]) {
				fail("Entries(%d, %d): entry %d differs", lo, hi, k)
			}
		}
		if len(a) > 0 {
			// The caller owns the slice: appending must not corrupt the log.
			_ = append(a, ent(999999, 1, "x"))
		}
	}
	sn1, _ := s.Snapshot()
	sn2, _ := ms.Snapshot()
	if !proto.Equal(sn1, sn2) {
		fail("Snapshot %v, MemoryStorage %v", sn1.GetMetadata(), sn2.GetMetadata())
	}
	h1, c1, _ := s.InitialState()
	h2, c2, _ := ms.InitialState()
	if !proto.Equal(h1, h2) || !proto.Equal(c1, c2) {
		fail("InitialState %v %v, MemoryStorage %v %v", h1, c1, h2, c2)
	}
}

// memAfterReopen is what a MemoryStorage holds when an application
// restarts the etcd way: apply the snapshot, append the entries after it,
// set the hard state (its commit at least the snapshot's index).
func memAfterReopen(t *testing.T, old *raft.MemoryStorage) *raft.MemoryStorage {
	t.Helper()
	ms := raft.NewMemoryStorage()
	snap, _ := old.Snapshot()
	if !raft.IsEmptySnap(snap) {
		if err := ms.ApplySnapshot(snap); err != nil {
			t.Fatal(err)
		}
	}
	si := snap.GetMetadata().GetIndex()
	last, _ := old.LastIndex()
	if last > si {
		ents, err := old.Entries(si+1, last+1, ^uint64(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := ms.Append(ents); err != nil {
			t.Fatal(err)
		}
	}
	hs, _, _ := old.InitialState()
	if want := expectHardState(hs, si, snap.GetMetadata().GetTerm()); want != nil {
		_ = ms.SetHardState(want)
	}
	return ms
}

func TestStorageMatchesMemoryStorageDifferential(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			fs := vfs.NewMem()
			o := Options{SegmentBytes: 2048, KeepSnapshots: 1 + int(seed%3)}
			s := openMem(t, fs, o)
			ms := raft.NewMemoryStorage()
			m := newModel()
			d := &driver{rng: rng}
			compareWithMemoryStorage(t, rng, s, ms, "fresh")
			for i := range 400 {
				o1 := d.next(m)
				if err := o1.apply(s); err != nil {
					t.Fatalf("op %d %v: %v", i, o1, err)
				}
				if err := o1.applyMem(ms); err != nil {
					t.Fatalf("op %d %v on MemoryStorage: %v", i, o1, err)
				}
				m.record(o1)
				compareWithMemoryStorage(t, rng, s, ms, fmt.Sprintf("after op %d %v", i, o1))
				if rng.IntN(40) == 0 {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					s = openMem(t, fs, o)
					ms = memAfterReopen(t, ms)
					m.reopened(s)
					compareWithMemoryStorage(t, rng, s, ms, fmt.Sprintf("reopen after op %d", i))
					if err := m.check(s); err != nil {
						t.Fatalf("reopen after op %d: %v", i, err)
					}
				}
			}
			if st := s.Stats(); st.Segments < 2 {
				t.Errorf("only %d segments: the test should roll the WAL", st.Segments)
			}
			s.Close()
		})
	}
}

// TestStorageRaftContractCases replays the cases of etcd raft's own
// storage_test.go (a log of entries 3, 4, 5 with terms 3, 4, 5) against
// Storage.
func TestStorageRaftContractCases(t *testing.T) {
	setup := func(t *testing.T) *Storage {
		s := openMem(t, vfs.NewMem(), Options{})
		mustSave(t, s, nil, []*pb.Entry{ent(4, 4, ""), ent(5, 5, "")}, leaderSnap(3, 3, ""))
		return s
	}
	t.Run("Term", func(t *testing.T) {
		s := setup(t)
		for _, tc := range []struct {
			i, term uint64
			err     error
		}{{2, 0, raft.ErrCompacted}, {3, 3, nil}, {4, 4, nil}, {5, 5, nil}, {6, 0, raft.ErrUnavailable}} {
			term, err := s.Term(tc.i)
			if term != tc.term || !errors.Is(err, tc.err) && (err != nil || tc.err != nil) {
				t.Errorf("Term(%d) = %d, %v; want %d, %v", tc.i, term, err, tc.term, tc.err)
			}
		}
	})
	t.Run("Entries", func(t *testing.T) {
		s := setup(t)
		mustSave(t, s, nil, []*pb.Entry{ent(6, 6, "")}, nil)
		sz := uint64(proto.Size(ent(4, 4, "")))
		for _, tc := range []struct {
			lo, hi, max uint64
			n           int
			err         error
		}{
			{2, 6, ^uint64(0), 0, raft.ErrCompacted},
			{3, 4, ^uint64(0), 0, raft.ErrCompacted},
			{4, 5, ^uint64(0), 1, nil},
			{4, 6, ^uint64(0), 2, nil},
			{4, 7, ^uint64(0), 3, nil},
			{4, 7, 0, 1, nil},        // at least one entry
			{4, 7, sz * 2, 2, nil},   // exactly two fit
			{4, 7, sz*3 - 1, 2, nil}, // the third does not
			{4, 7, sz * 3, 3, nil},
		} {
			got, err := s.Entries(tc.lo, tc.hi, tc.max)
			if len(got) != tc.n || !errors.Is(err, tc.err) && (err != nil || tc.err != nil) {
				t.Errorf("Entries(%d, %d, %d) = %d entries, %v; want %d, %v", tc.lo, tc.hi, tc.max, len(got), err, tc.n, tc.err)
			}
		}
	})
	t.Run("Compact", func(t *testing.T) {
		for _, tc := range []struct {
			i     uint64
			err   error
			first uint64
		}{{2, raft.ErrCompacted, 4}, {3, raft.ErrCompacted, 4}, {4, nil, 5}, {5, nil, 6}} {
			s := setup(t)
			err := s.Compact(tc.i)
			first, _ := s.FirstIndex()
			if !errors.Is(err, tc.err) && (err != nil || tc.err != nil) || first != tc.first {
				t.Errorf("Compact(%d) = %v, first %d; want %v, %d", tc.i, err, first, tc.err, tc.first)
			}
		}
	})
	t.Run("CreateSnapshot", func(t *testing.T) {
		cs := &pb.ConfState{Voters: []uint64{1, 2, 3}}
		for _, tc := range []struct {
			i, term uint64
			err     error
		}{{3, 0, raft.ErrSnapOutOfDate}, {4, 4, nil}, {5, 5, nil}, {6, 0, raft.ErrUnavailable}} {
			s := setup(t)
			snap, err := s.CreateSnapshot(tc.i, cs, []byte("data"))
			if !errors.Is(err, tc.err) && (err != nil || tc.err != nil) {
				t.Errorf("CreateSnapshot(%d) = %v, want %v", tc.i, err, tc.err)
				continue
			}
			if err == nil && (snap.GetMetadata().GetTerm() != tc.term || cs.Equivalent(snap.GetMetadata().GetConfState()) != nil) {
				t.Errorf("CreateSnapshot(%d) = %v", tc.i, snap.GetMetadata())
			}
		}
	})
	t.Run("Append", func(t *testing.T) {
		for _, tc := range []struct {
			ents []*pb.Entry
			want []uint64 // terms of entries 4..
			err  error
		}{
			{[]*pb.Entry{ent(4, 4, ""), ent(5, 5, "")}, []uint64{4, 5}, nil},
			{[]*pb.Entry{ent(4, 4, ""), ent(5, 6, "")}, []uint64{4, 6}, nil},
			{[]*pb.Entry{ent(4, 4, ""), ent(5, 5, ""), ent(6, 5, "")}, []uint64{4, 5, 5}, nil},
			{[]*pb.Entry{ent(2, 3, ""), ent(3, 3, ""), ent(4, 5, "")}, []uint64{5}, nil}, // below the snapshot: dropped
			{[]*pb.Entry{ent(4, 5, "")}, []uint64{5}, nil},                               // truncates 5
			{[]*pb.Entry{ent(6, 5, "")}, []uint64{4, 5, 5}, nil},
			{[]*pb.Entry{ent(7, 5, "")}, []uint64{4, 5}, ErrNonContiguous}, // a gap changes nothing
		} {
			s := setup(t)
			err := s.Save(nil, tc.ents, nil)
			if !errors.Is(err, tc.err) && (err != nil || tc.err != nil) {
				t.Errorf("Save(%v) = %v, want %v", tc.ents, err, tc.err)
			}
			last, _ := s.LastIndex()
			var terms []uint64
			for i := uint64(4); i <= last; i++ {
				tm, _ := s.Term(i)
				terms = append(terms, tm)
			}
			if fmt.Sprint(terms) != fmt.Sprint(tc.want) {
				t.Errorf("after Save(%v): terms %v, want %v", tc.ents, terms, tc.want)
			}
		}
	})
}

func TestSaveOverwritesConflictingSuffixAcrossReopen(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Options{SegmentBytes: 60})
	var ents []*pb.Entry
	for i := uint64(1); i <= 10; i++ {
		ents = append(ents, ent(i, 1, fmt.Sprintf("a%d", i)))
	}
	mustSave(t, s, hardState(1, 1, 4), ents[:5], nil)
	mustSave(t, s, nil, ents[5:], nil)
	// A new leader at term 2 replaces 6..10 with 6..7; then term 3 replaces
	// 7 with 7..8, in a later segment than the entries it replaces.
	mustSave(t, s, hardState(2, 2, 5), []*pb.Entry{ent(6, 2, "b6"), ent(7, 2, "b7")}, nil)
	mustSave(t, s, hardState(3, 3, 6), []*pb.Entry{ent(7, 3, "c7"), ent(8, 3, "c8")}, nil)
	want := []string{"a1", "a2", "a3", "a4", "a5", "b6", "c7", "c8"}
	check := func(s *Storage) {
		t.Helper()
		last, _ := s.LastIndex()
		got, err := s.Entries(1, last+1, ^uint64(0))
		if err != nil {
			t.Fatal(err)
		}
		var data []string
		for _, e := range got {
			data = append(data, string(e.GetData()))
		}
		if fmt.Sprint(data) != fmt.Sprint(want) {
			t.Fatalf("log %v, want %v", data, want)
		}
		hs, _, _ := s.InitialState()
		if !proto.Equal(hs, hardState(3, 3, 6)) {
			t.Fatalf("hard state %v", hs)
		}
	}
	check(s)
	if n := s.Stats().Segments; n < 2 {
		t.Fatalf("%d segments, want several", n)
	}
	s.Close()
	s = openMem(t, fs, Options{SegmentBytes: 60})
	check(s)
	s.Close()
}

func TestStorageConcurrentReadersDuringSaves(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Options{SegmentBytes: 4096})
	defer s.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				first, _ := s.FirstIndex()
				last, _ := s.LastIndex()
				if last >= first {
					ents, err := s.Entries(first, last+1, 1<<20)
					if err != nil && !errors.Is(err, raft.ErrCompacted) {
						t.Error(err)
						return
					}
					for k, e := range ents {
						if e.GetIndex() != ents[0].GetIndex()+uint64(k) {
							t.Error("non-contiguous read")
							return
						}
					}
				}
				_ = s.Stats()
			}
		}()
	}
	for i := uint64(1); i <= 300; i++ {
		mustSave(t, s, hardState(1, 1, i-1), []*pb.Entry{ent(i, 1, "x")}, nil)
		if i%50 == 0 {
			if _, err := s.CreateSnapshot(i-1, nil, []byte("s")); err != nil {
				t.Fatal(err)
			}
			if err := s.Compact(i - 10); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
}
