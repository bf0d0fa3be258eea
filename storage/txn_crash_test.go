package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/strata-io/strata/storage/producer"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

// txnFaultRun drives a seeded transactional workload (plain and
// transactional batches, commits, aborts, rolls, flushes) on fs until the
// first error and returns how many steps succeeded.
func txnFaultRun(t *testing.T, fs vfs.FS, seed uint64, steps int) (l *Log, done int, err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	opts := crashOptions(fs, 0, false)
	opts.Config.SegmentBytes = 900
	l, err = OpenLog(opts)
	if err != nil {
		return nil, 0, err
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := range steps {
		pid := int64(1 + rng.IntN(3))
		switch r := rng.IntN(10); {
		case r < 3:
			_, err = l.Append(txnBatch(t, -1, 0, 0, 1+rng.IntN(3), false, fmt.Sprint(i), crashBaseTs), AppendOptions{LeaderEpoch: crashEpoch, AssignOffsets: true})
		case r < 6:
			_, err = l.Append(txnBatch(t, pid, 0, 0, 1+rng.IntN(3), true, fmt.Sprint(i), crashBaseTs), AppendOptions{LeaderEpoch: crashEpoch, AssignOffsets: true})
		case r < 8:
			_, err = l.AppendMarker(producer.Marker{ProducerID: pid, Commit: rng.IntN(2) == 0}, crashEpoch)
		case r < 9:
			err = l.Roll()
		default:
			err = l.Flush()
		}
		if err != nil {
			return l, i, err
		}
	}
	return l, steps, nil
}

// TestTxnErrorSweepRecoversConsistentState fails the Nth write, sync,
// rename, create or truncate of a transactional workload, for N across the
// workload: the failure surfaces (the log latches, or refuses for a full
// disk), and both a restart and a power loss reopen a log whose
// transaction state and aborted-transaction index are the ones its data
// implies (a follower copying its batches derives the same).
func TestTxnErrorSweepRecoversConsistentState(t *testing.T) {
	const steps = 60
	for seed := uint64(1); seed <= 4; seed++ {
		for _, kind := range crashFaultKinds() {
			t.Run(fmt.Sprintf("seed=%d/%s", seed, kind.name), func(t *testing.T) { txnErrorSweep(t, kind, seed, steps) })
		}
	}
}

// txnErrorSweep is one seed and fault kind of
// [TestTxnErrorSweepRecoversConsistentState].
func txnErrorSweep(t *testing.T, kind faultKind, seed uint64, steps int) {
	count := kind.rule()
	l, _, err := txnFaultRun(t, errfs.Wrap(newCrashFS(t), count), seed, steps)
	if err != nil {
		t.Fatalf("fault-free run failed: %v", err)
	}
	l.Close()
	if count.Matched() == 0 {
		t.Skip("the workload never makes this call")
	}
	perKind := 10
	if s := os.Getenv("STRATA_TEST_TXN_FAULTS"); s != "" {
		perKind, _ = strconv.Atoi(s)
	}
	for _, n := range sample(count.Matched(), perKind) {
		n++
		label := fmt.Sprintf("%s nth=%d/%d", kind.name, n, count.Matched())
		mem := newCrashFS(t)
		rule := kind.act(kind.rule().Nth(n))
		l, _, err := txnFaultRun(t, errfs.Wrap(mem, rule), seed, steps)
		if l != nil && err != nil && !errors.Is(err, ErrLogFailed) && !errors.Is(err, ErrLogDirFull) {
			t.Fatalf("%s: failure surfaced as %v", label, err)
		}
		rp := int64(0)
		if l != nil {
			rp = l.RecoveryPoint()
			l.Close()
		}
		for _, c := range []struct {
			name string
			fs   *vfs.MemFS
		}{{"restart", mem.Clone()}, {"power loss", mem.CrashClone(0, rand.New(rand.NewPCG(1, 2)))}} {
			r, err := OpenLog(crashOptions(c.fs, rp, false))
			if err != nil {
				t.Fatalf("%s %s: reopen: %v", label, c.name, err)
			}
			r.SetHighWatermark(r.LogEndOffset())
			got, want := stateOf(r), replayedState(t, r)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %s: recovered transaction state\n got %+v\nwant %+v (implied by the data)", label, c.name, got, want)
			}
			if files := txnIndexFiles(t, c.fs, crashDir); !reflect.DeepEqual(files, got.Index) {
				t.Fatalf("%s %s: .txnindex files %+v, memory %+v", label, c.name, files, got.Index)
			}
			r.Close()
		}
	}
}
