package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage/vfs"
)

// TestControllerCrashKeepsEveryAcknowledgedDecision runs decisions against
// a single controller on a MemFS and, right after the last one is
// acknowledged, takes the file system a power loss would leave (a random
// share of unsynced bytes kept, snapshots and compaction on the way).
// A controller reopened on it must hold every topic whose creation was
// acknowledged before the crash: the Ready loop fsyncs before it applies
// and answers.
func TestControllerCrashKeepsEveryAcknowledgedDecision(t *testing.T) {
	for trial := range 6 {
		t.Run(fmt.Sprint("trial=", trial), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(trial), 99))
			fs := vfs.NewMem()
			open := func(fs vfs.FS) *Controller {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				ctl, err := Open(Options{Config: Config{
					NodeID: 1, Voters: []Voter{{1, ln.Addr().String()}}, MetadataLogDir: "/meta",
					TickInterval: testTick, ElectionTicks: testElectionTicks, HeartbeatTicks: 1,
					SnapshotEntries: 7, SnapshotCatchUpEntries: 3, FS: fs, Logger: testLogger(),
				}, Listener: ln})
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				return ctl
			}
			ctl := open(fs)
			if !waitFor(testWait, ctl.IsLeader) {
				t.Fatal("no leader")
			}
			registerBrokers(t, ctl, 1, 0)

			// Acknowledged decisions, then the crash right at the last
			// acknowledgement: nothing gets a chance to reach the disk
			// after the answer.
			var mustHave []string
			for i := range 3 + rng.IntN(25) {
				name := fmt.Sprint("c", i)
				cx, cancel := context.WithTimeout(context.Background(), testWait)
				res, err := ctl.CreateTopics(cx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: name, NumPartitions: 1, ReplicationFactor: 1}}})
				cancel()
				if err != nil || res[0].Err != nil {
					t.Fatalf("create %s: %v %v", name, err, res)
				}
				mustHave = append(mustHave, name)
			}
			crashed := fs.CrashClone(rng.IntN(101), rng)
			ctl.Close()

			ctl = open(crashed)
			defer ctl.Close()
			if !waitFor(testWait, ctl.IsLeader) {
				t.Fatal("no leader after crash")
			}
			st := ctl.State()
			for _, name := range mustHave {
				if _, ok := st.TopicByName(name); !ok {
					t.Fatalf("acknowledged topic %s lost in the crash (%d acknowledged)", name, len(mustHave))
				}
			}
			if _, ok := st.Broker(101); !ok {
				t.Fatal("broker registration lost")
			}
		})
	}
}

// failingStorage is a MemoryStorage whose Save fails once broken is set.
type failingStorage struct {
	*MemoryStorage
	broken atomic.Bool
}

var errDiskGone = errors.New("test: disk gone")

func (f *failingStorage) Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	if f.broken.Load() {
		return errDiskGone
	}
	return f.MemoryStorage.Save(hs, ents, snap)
}

// TestControllerStorageFailureStopsNodeAndRedirects: when Save fails the
// node stops taking part (never runs on a disk in an unknown state); the
// request in flight fails, and later requests are told NOT_CONTROLLER at
// once so clients go to another controller.
func TestControllerStorageFailureStopsNodeAndRedirects(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := &failingStorage{MemoryStorage: NewMemoryStorage()}
	ctl, err := Open(Options{Config: Config{NodeID: 1, Voters: []Voter{{1, ln.Addr().String()}},
		TickInterval: testTick, Logger: testLogger()}, Storage: fs, Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	registerBrokers(t, ctl, 1, 0)
	fs.broken.Store(true)
	res, err := ctl.CreateTopics(ctx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "lost", NumPartitions: 1, ReplicationFactor: 1}}})
	if err == nil {
		t.Fatalf("create on a failed disk succeeded: %+v", res)
	}
	start := time.Now()
	_, err = ctl.BrokerHeartbeat(ctx(t), metadata.BrokerHeartbeatRequest{BrokerID: 101, BrokerEpoch: 1})
	var nc *NotControllerError
	if !errors.As(err, &nc) || nc.LeaderID != -1 {
		t.Fatalf("request to a failed controller: %v, want NOT_CONTROLLER", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("NOT_CONTROLLER took %v", el)
	}
	if ctl.IsLeader() {
		t.Fatal("a failed node still claims leadership")
	}
	if _, ok := ctl.State().TopicByName("lost"); ok {
		t.Fatal("a decision whose save failed was applied")
	}
}
