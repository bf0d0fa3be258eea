package raftlog

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/strata-io/strata/storage/vfs"
)

// TestRecoveryScenarios runs the scripts in testdata/recovery. Commands:
//
//	open [segment=<bytes>] [keep=<snapshots>]   (re)open; prints the recovery report and the log
//	save [hs=(term,vote,commit)] [ents=(first,last,term)] [snap=(index,term)]
//	snapshot index=<i>                          CreateSnapshot(i)
//	compact index=<i>
//	crash keep=<pct>                            power loss keeping pct% of unsynced bytes
//	cut file=<n|last> at=<offset>               truncate a WAL segment (negative: from the end)
//	flip file=<n|last|snap> at=<offset>         flip a byte of a WAL segment (or the newest snapshot)
//	ls                                          files and sizes
//	log                                         what raft would read
//
// Regenerate expectations with -rewrite (then read the diff).
func TestRecoveryScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/recovery", func(t *testing.T, path string) {
		fs := vfs.NewMem()
		var s *Storage
		o := Options{Logger: quiet, Dir: testDir}
		rng := rand.New(rand.NewPCG(1, 2))
		closeS := func() {
			if s != nil {
				s.Close()
				s = nil
			}
		}
		defer closeS()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "open":
				closeS()
				o.SegmentBytes, o.KeepSnapshots = 0, 0
				td.MaybeScanArgs(t, "segment", &o.SegmentBytes)
				td.MaybeScanArgs(t, "keep", &o.KeepSnapshots)
				o.FS = fs
				var err error
				if s, err = Open(o); err != nil {
					return fmt.Sprintf("error: %v\n", err)
				}
				return describeReport(s.Recovery()) + describeLog(s)
			case "save":
				var hs *pb.HardState
				var ents []*pb.Entry
				var snap *pb.Snapshot
				var a, b, c uint64
				if td.MaybeScanArgs(t, "hs", &a, &b, &c) {
					hs = hardState(a, b, c)
				}
				if td.MaybeScanArgs(t, "ents", &a, &b, &c) {
					for i := a; i <= b; i++ {
						ents = append(ents, ent(i, c, fmt.Sprintf("e%d.%d", i, c)))
					}
				}
				if td.MaybeScanArgs(t, "snap", &a, &b) {
					snap = leaderSnap(a, b, fmt.Sprintf("leader@%d", a))
				}
				return result(s.Save(hs, ents, snap))
			case "snapshot":
				var i uint64
				td.ScanArgs(t, "index", &i)
				_, err := s.CreateSnapshot(i, nil, []byte(fmt.Sprintf("state@%d", i)))
				return result(err)
			case "compact":
				var i uint64
				td.ScanArgs(t, "index", &i)
				return result(s.Compact(i))
			case "crash":
				var pct int
				td.ScanArgs(t, "keep", &pct)
				fs = fs.CrashClone(pct, rng)
				s = nil // its file system is gone; nothing to close
				return "crashed\n"
			case "cut", "flip":
				var at int64
				td.ScanArgs(t, "at", &at)
				name := segmentArg(t, td, fs)
				f, err := fs.OpenReadWrite(joinDir(testDir, name))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				st, _ := f.Stat()
				if at < 0 {
					at += st.Size()
				}
				if td.Cmd == "cut" {
					if err := f.Truncate(at); err != nil {
						t.Fatal(err)
					}
					return fmt.Sprintf("%s cut to %d of %d\n", name, at, st.Size())
				}
				buf := make([]byte, 1)
				f.ReadAt(buf, at)
				buf[0] ^= 0xff
				f.WriteAt(buf, at)
				return fmt.Sprintf("%s byte %d flipped\n", name, at)
			case "ls":
				var out strings.Builder
				for _, n := range listNames(t, fs) {
					fi, err := fs.Stat(joinDir(testDir, n))
					if err != nil {
						t.Fatal(err)
					}
					fmt.Fprintf(&out, "%s %d\n", n, fi.Size())
				}
				return out.String()
			case "log":
				return describeLog(s)
			}
			t.Fatalf("unknown command %q", td.Cmd)
			return ""
		})
	})
}

func result(err error) string {
	if err != nil {
		return fmt.Sprintf("error: %v\n", err)
	}
	return "ok\n"
}

// segmentArg resolves file=<n|last> to a WAL segment name.
func segmentArg(t *testing.T, td *datadriven.TestData, fs vfs.FS) string {
	var arg string
	td.ScanArgs(t, "file", &arg)
	var segs []string
	for _, n := range listNames(t, fs) {
		if filepath.Ext(n) == walSuffix {
			segs = append(segs, n)
		}
	}
	if arg == "last" {
		return segs[len(segs)-1]
	}
	if arg == "snap" { // the newest snapshot file
		var snaps []string
		for _, n := range listNames(t, fs) {
			if filepath.Ext(n) == snapSuffix {
				snaps = append(snaps, n)
			}
		}
		return snaps[len(snaps)-1]
	}
	var i int
	fmt.Sscan(arg, &i)
	return segs[i]
}

func describeReport(r RecoveryReport) string {
	var b strings.Builder
	if r.TruncatedSegment != "" {
		fmt.Fprintf(&b, "truncated %s at %d (%d bytes)\n", r.TruncatedSegment, r.TruncatedAt, r.TruncatedBytes)
	}
	for _, n := range r.RemovedSegments {
		fmt.Fprintf(&b, "removed torn segment %s\n", n)
	}
	for _, n := range r.CorruptSnapshots {
		fmt.Fprintf(&b, "corrupt snapshot %s\n", n)
	}
	for _, n := range r.RemovedTemp {
		fmt.Fprintf(&b, "removed %s\n", n)
	}
	if r.DroppedEntries > 0 {
		fmt.Fprintf(&b, "dropped %d stale entries\n", r.DroppedEntries)
	}
	return b.String()
}

func describeLog(s *Storage) string {
	var b strings.Builder
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	snap, _ := s.Snapshot()
	md := snap.GetMetadata()
	fmt.Fprintf(&b, "snapshot %d@%d %q\n", md.GetIndex(), md.GetTerm(), snap.GetData())
	hs, _, _ := s.InitialState()
	if hs == nil {
		b.WriteString("hard state none\n")
	} else {
		fmt.Fprintf(&b, "hard state term=%d vote=%d commit=%d\n", hs.GetTerm(), hs.GetVote(), hs.GetCommit())
	}
	fmt.Fprintf(&b, "log [%d, %d]:", first, last)
	if last >= first {
		ents, err := s.Entries(first, last+1, ^uint64(0))
		if err != nil {
			fmt.Fprintf(&b, " error %v", err)
		}
		for _, e := range ents {
			fmt.Fprintf(&b, " %d@%d", e.GetIndex(), e.GetTerm())
		}
	}
	b.WriteString("\n")
	return b.String()
}
