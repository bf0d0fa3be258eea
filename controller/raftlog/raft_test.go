package raftlog

import (
	"fmt"
	"io"
	"log"
	"strings"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strata-io/strata/storage/vfs"
)

// fsm is a toy state machine: the list of applied payloads, with the
// index of the last applied entry. Its snapshot is the list joined.
type fsm struct {
	applied uint64
	vals    []string
}

func (f *fsm) restore(snap *pb.Snapshot) {
	f.applied = snap.GetMetadata().GetIndex()
	f.vals = nil
	if d := string(snap.GetData()); d != "" {
		f.vals = strings.Split(d, ",")
	}
}

// node drives a single-voter RawNode over a Storage by the book: persist
// (Save), send (nothing to send), apply, advance.
type node struct {
	t  *testing.T
	rn *raft.RawNode
	s  *Storage
	f  *fsm
}

func newNode(t *testing.T, s *Storage) *node {
	t.Helper()
	snap, _ := s.Snapshot()
	f := &fsm{}
	f.restore(snap)
	rn, err := raft.NewRawNode(&raft.Config{
		ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: s,
		MaxSizePerMsg: 4096, MaxInflightMsgs: 64, Applied: f.applied,
		Logger: &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &node{t: t, rn: rn, s: s, f: f}
}

// drain handles Ready until there is none.
func (n *node) drain() {
	n.t.Helper()
	for i := 0; n.rn.HasReady(); i++ {
		if i > 10000 {
			n.t.Fatal("Ready loop does not settle")
		}
		rd := n.rn.Ready()
		if err := n.s.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
			n.t.Fatal(err)
		}
		for _, e := range rd.CommittedEntries {
			switch e.GetType() {
			case pb.EntryConfChange:
				var cc pb.ConfChange
				if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
					n.t.Fatal(err)
				}
				n.rn.ApplyConfChange(&cc)
			case pb.EntryNormal:
				if len(e.GetData()) > 0 {
					n.f.vals = append(n.f.vals, string(e.GetData()))
				}
			}
			n.f.applied = e.GetIndex()
		}
		n.rn.Advance(rd)
	}
}

func (n *node) campaign() {
	n.t.Helper()
	if err := n.rn.Campaign(); err != nil {
		n.t.Fatal(err)
	}
	n.drain()
	if st := n.rn.Status(); st.RaftState != raft.StateLeader {
		n.t.Fatalf("not leader: %v", st.RaftState)
	}
}

// TestRawNodeRestartsFromStorageAfterCrash runs etcd raft on a Storage:
// a bootstrap snapshot, proposals, a snapshot with compaction mid-way, then
// a crash that keeps only fsynced bytes. The restarted node, restoring its
// state machine from Snapshot and re-applying the committed entries raft
// hands back, must reach exactly the state it had.
func TestRawNodeRestartsFromStorageAfterCrash(t *testing.T) {
	for _, boot := range []string{"snapshot", "peers"} {
		for _, snapAt := range []int{120, -1} {
			t.Run(fmt.Sprintf("bootstrap=%s/snapshot=%d", boot, snapAt), func(t *testing.T) {
				testRawNodeRestart(t, boot, snapAt)
			})
		}
	}
}

func testRawNodeRestart(t *testing.T, boot string, snapAt int) {
	fs := vfs.NewMem()
	o := Options{SegmentBytes: 1024}
	s := openMem(t, fs, o)
	var n *node
	if boot == "snapshot" {
		// Bootstrap the way raft recommends: a first snapshot holding the
		// voters, so the log starts at 2.
		mustSave(t, s, nil, nil, pb.EnsureSnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{
			Index: proto.Uint64(1), Term: proto.Uint64(1), ConfState: &pb.ConfState{Voters: []uint64{1}}}}))
		n = newNode(t, s)
	} else {
		// raft's Bootstrap: conf-change entries 1.. in the first Ready.
		n = newNode(t, s)
		if err := n.rn.Bootstrap([]raft.Peer{{ID: 1}}); err != nil {
			t.Fatal(err)
		}
		n.drain()
	}
	n.campaign()
	for i := range 200 {
		if err := n.rn.Propose([]byte(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatal(err)
		}
		n.drain()
		if i == snapAt {
			cs := n.rn.Status().Config.Voters.IDs()
			var voters []uint64
			for id := range cs {
				voters = append(voters, id)
			}
			if _, err := s.CreateSnapshot(n.f.applied, &pb.ConfState{Voters: voters}, []byte(strings.Join(n.f.vals, ","))); err != nil {
				t.Fatal(err)
			}
			if err := s.Compact(n.f.applied - 10); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(n.f.vals) != 200 {
		t.Fatalf("applied %d values", len(n.f.vals))
	}
	want := strings.Join(n.f.vals, ",")
	wantHS := n.rn.Status().HardState

	crashed := fs.CrashClone(0, nil)
	s2 := openMem(t, crashed, o)
	defer s2.Close()
	n2 := newNode(t, s2)
	n2.drain()
	if got := strings.Join(n2.f.vals, ","); got != want {
		t.Fatalf("after restart applied %d values, want 200", len(n2.f.vals))
	}
	if hs := n2.rn.Status().HardState; hs.GetTerm() != wantHS.GetTerm() || hs.GetCommit() != wantHS.GetCommit() {
		t.Fatalf("hard state %v, want %v", hs, wantHS)
	}
	// It leads again and keeps committing.
	for range 30 {
		n2.rn.Tick()
		n2.drain()
	}
	if n2.rn.Status().RaftState != raft.StateLeader {
		n2.campaign()
	}
	if err := n2.rn.Propose([]byte("after")); err != nil {
		t.Fatal(err)
	}
	n2.drain()
	if got := n2.f.vals[len(n2.f.vals)-1]; got != "after" {
		t.Fatalf("last applied %q", got)
	}
	s.Close()
}
