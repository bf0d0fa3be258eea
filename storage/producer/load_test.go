package producer

import (
	"bytes"
	"errors"
	"testing"

	"github.com/strata-io/strata/internal/batch"
)

// replayer serves a partition's appended batches the way a log reader
// would: from the batch holding from, in offset order. It records where
// each replay started.
type replayer struct {
	log    []appended
	starts []int64
}

func (r *replayer) replay(from int64, apply func(h batch.Header) error) error {
	r.starts = append(r.starts, from)
	for _, a := range r.log {
		if a.h.LastOffset() < from {
			continue
		}
		if err := apply(a.h); err != nil {
			return err
		}
	}
	return nil
}

// loadWorkload appends a mix of idempotent and plain batches and returns
// the partition and the snapshot taken at a "roll" after the first half.
func loadWorkload(t *testing.T) (p *partition, snapOff int64, snap []byte) {
	t.Helper()
	p = newPartition(Options{})
	seq := map[int64]int32{}
	step := func(i int) {
		pid := int64(i % 4)
		if i%5 == 4 {
			p.mustProduce(t, plainHdr(2))
			return
		}
		h := hdr(pid, 1, seq[pid], int32(1+i%3))
		h.MaxTimestamp = p.now // CreateTime = append time here, so replay matches
		p.mustProduce(t, h)
		seq[pid] += int32(1 + i%3)
	}
	for i := 0; i < 20; i++ {
		step(i)
	}
	snapOff, snap = p.next, p.st.Snapshot()
	for i := 20; i < 40; i++ {
		step(i)
	}
	return p, snapOff, snap
}

func TestLoadRestoresSnapshotThenReplaysTheRest(t *testing.T) {
	p, snapOff, snap := loadWorkload(t)
	r := &replayer{log: p.log}
	s, res, err := Load(Options{}, snapOff, snap, p.now, r.replay)
	if err != nil || res.SnapshotErr != nil {
		t.Fatalf("Load: %v %v", err, res.SnapshotErr)
	}
	if res.From != snapOff || len(r.starts) != 1 || r.starts[0] != snapOff {
		t.Fatalf("replay started at %v, result %+v, want %d", r.starts, res, snapOff)
	}
	if res.Replayed != 16 { // 20 batches after the snapshot, 4 of them plain
		t.Fatalf("replayed %d batches", res.Replayed)
	}
	if !bytes.Equal(s.Snapshot(), p.st.Snapshot()) {
		t.Fatal("loaded state differs from the live one")
	}
}

func TestLoadWithoutSnapshotReplaysEverything(t *testing.T) {
	p, _, _ := loadWorkload(t)
	r := &replayer{log: p.log}
	s, res, err := Load(Options{}, 0, nil, p.now, r.replay)
	if err != nil || res.SnapshotErr != nil || res.From != 0 || res.Replayed != 32 {
		t.Fatalf("Load: %v %+v", err, res)
	}
	if !bytes.Equal(s.Snapshot(), p.st.Snapshot()) {
		t.Fatal("rebuilt state differs from the live one")
	}
}

func TestLoadFallsBackToFullReplayOnCorruptSnapshot(t *testing.T) {
	p, snapOff, snap := loadWorkload(t)
	snap[len(snap)-1] ^= 1
	r := &replayer{log: p.log}
	s, res, err := Load(Options{}, snapOff, snap, p.now, r.replay)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res.SnapshotErr, ErrCorruptSnapshot) || res.From != 0 || r.starts[0] != 0 {
		t.Fatalf("result %+v starts %v", res, r.starts)
	}
	if !bytes.Equal(s.Snapshot(), p.st.Snapshot()) {
		t.Fatal("rebuilt state differs from the live one")
	}
}

func TestLoadSkipsBatchesBelowTheSnapshotOffset(t *testing.T) {
	p, snapOff, snap := loadWorkload(t)
	// A reader that ignores from and serves the whole log: batches the
	// snapshot already holds must not be applied twice.
	all := func(_ int64, apply func(h batch.Header) error) error {
		for _, a := range p.log {
			if err := apply(a.h); err != nil {
				return err
			}
		}
		return nil
	}
	s, res, err := Load(Options{}, snapOff, snap, p.now, all)
	if err != nil || res.Replayed != 16 {
		t.Fatalf("%v %+v", err, res)
	}
	if !bytes.Equal(s.Snapshot(), p.st.Snapshot()) {
		t.Fatal("loaded state differs from the live one")
	}
}

func TestLoadReturnsReplayError(t *testing.T) {
	p, snapOff, snap := loadWorkload(t)
	boom := errors.New("disk on fire")
	failing := func(from int64, apply func(h batch.Header) error) error {
		if err := apply(p.log[len(p.log)-1].h); err != nil {
			return err
		}
		return boom
	}
	s, _, err := Load(Options{}, snapOff, snap, p.now, failing)
	if !errors.Is(err, boom) || s != nil {
		t.Fatalf("Load = %v, %v", s, err)
	}
}

func TestLoadExpiresIdleProducers(t *testing.T) {
	p, snapOff, snap := loadWorkload(t)
	r := &replayer{log: p.log}
	s, res, err := Load(Options{ExpirationMs: 1000}, snapOff, snap, p.now+1000, r.replay)
	if err != nil || res.Expired != 4 || s.Producers() != 0 {
		t.Fatalf("%v %+v, %d producers", err, res, s.Producers())
	}
}
