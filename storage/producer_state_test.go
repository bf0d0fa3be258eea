package storage_test

import (
	"fmt"

	"bytes"
	"github.com/twmb/franz-go/pkg/kmsg"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/producer"
	"github.com/strata-io/strata/storage/vfs"
)

// leader is a broker partition in miniature, wired as the package doc
// says: a Tx around each append, a mutex for the State that is never held
// across the log append, and a ProducerSnapshot callback taking it.
type leader struct {
	tb  testing.TB
	fs  vfs.FS
	dir string
	log *storage.Log
	mu  sync.Mutex // guards st and snaps
	st  *producer.State
	// snaps records every snapshot the log asked for, to check each.
	snaps []takenSnapshot
}

type takenSnapshot struct {
	next int64
	data []byte
}

func (p *leader) open(st *producer.State) {
	p.tb.Helper()
	p.st = st
	cfg := storage.DefaultConfig()
	cfg.SegmentBytes = 2048
	l, err := storage.OpenLog(storage.LogOptions{
		Dir: p.dir, Topic: "t", Partition: 0, FS: p.fs, Config: cfg,
		ProducerSnapshot: func(next int64) ([]byte, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			data := p.st.SnapshotAt(next)
			p.snaps = append(p.snaps, takenSnapshot{next, data})
			return data, nil
		},
	})
	if err != nil {
		p.tb.Fatalf("OpenLog: %v", err)
	}
	p.log = l
}

// produce runs one client batch through Check, the log and Commit, and
// returns the acknowledged base offset.
func (p *leader) produce(b []byte) (base int64, dup bool, err error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return -1, false, err
	}
	p.mu.Lock()
	tx := p.st.Begin()
	d, err := tx.Check(h)
	if err != nil || d != nil {
		tx.Abort()
		p.mu.Unlock()
		if d != nil {
			return d.FirstOffset, true, nil
		}
		return -1, false, err
	}
	base = p.log.LogEndOffset()
	tx.Update(h, base, h.MaxTimestamp) // CreateTime: what replay will see
	p.mu.Unlock()
	info, err := p.log.Append(b, storage.AppendOptions{LeaderEpoch: 1, AssignOffsets: true})
	p.mu.Lock()
	if err != nil {
		tx.Abort()
	} else {
		tx.Commit()
	}
	p.mu.Unlock()
	if err == nil && info.FirstOffset != base {
		p.tb.Fatalf("appended at %d, recorded at %d", info.FirstOffset, base)
	}
	return base, false, err
}

// replay reads the log's batch headers from from, as Load wants them.
func (p *leader) replay(from int64, apply func(h batch.Header) error) error {
	off := max(from, p.log.LocalLogStartOffset())
	end := p.log.LogEndOffset()
	for off < end {
		v, err := p.log.Read(off, 1<<20, end)
		if err != nil {
			return err
		}
		b, err := v.Bytes()
		v.Release()
		if err != nil {
			return err
		}
		for rest := b; len(rest) > 0; {
			first, r, err := batch.Split(rest)
			if err != nil {
				return err
			}
			h, err := batch.ParseHeader(first)
			if err != nil {
				return err
			}
			if err := apply(h); err != nil {
				return err
			}
			rest = r
		}
		off = v.NextOffset
	}
	return nil
}

// TestStorageSnapshotsAreExactAndReopenLoadsState (moved here from storage/producer, which storage now imports) runs idempotent traffic
// with retries into a real storage.Log that rolls every few batches, with
// extra rolls from another goroutine racing the appends (as the retention
// goroutine's rolls do). Then: the latest snapshot must equal the state
// rebuilt from the log below its offset, Load after a reopen must equal
// the live state, and a retry after the reopen is acknowledged at its
// original offsets.
func TestStorageSnapshotsAreExactAndReopenLoadsState(t *testing.T) {
	p := &leader{tb: t, fs: vfs.NewMem(), dir: "/data/t-0"}
	p.open(producer.New(producer.Options{}))

	rolls := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range rolls {
			if err := p.log.Roll(); err != nil {
				t.Errorf("Roll: %v", err)
				return
			}
		}
	}()

	rng := rand.New(rand.NewPCG(7, 7))
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	type sent struct {
		b    []byte
		base int64
	}
	seq := map[int64]int32{}
	last := map[int64]sent{}
	appended := 0
	for i := 0; i < 400; i++ {
		pid := int64(1 + rng.IntN(3))
		if l, ok := last[pid]; ok && rng.IntN(4) == 0 {
			// A retry after a lost acknowledgement.
			base, dup, err := p.produce(l.b)
			if err != nil || !dup || base != l.base {
				t.Fatalf("retry of pid %d: base %d dup %v err %v, want %d", pid, base, dup, err, l.base)
			}
			continue
		}
		n := 1 + rng.IntN(5)
		ts += int64(rng.IntN(3))
		b := idemBatch(t, pid, 0, seq[pid], n, ts)
		base, dup, err := p.produce(b)
		if err != nil || dup {
			t.Fatalf("produce pid %d seq %d: dup %v err %v", pid, seq[pid], dup, err)
		}
		seq[pid] += int32(n)
		last[pid] = sent{b, base}
		appended++
		if rng.IntN(8) == 0 {
			select {
			case rolls <- struct{}{}:
			default:
			}
		}
	}
	close(rolls)
	wg.Wait()
	if p.log.NumSegments() < 5 {
		t.Fatalf("only %d segments: the test did not roll", p.log.NumSegments())
	}

	// Every snapshot taken, by a roll inside an append or by the racing
	// roller, is exactly the state of the log below its offset.
	for _, sn := range p.snaps {
		below := func(from int64, apply func(h batch.Header) error) error {
			return p.replay(from, func(h batch.Header) error {
				if h.BaseOffset >= sn.next {
					return nil
				}
				return apply(h)
			})
		}
		ref, _, err := producer.Load(producer.Options{}, 0, nil, 0, below)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ref.Snapshot(), sn.data) {
			t.Fatalf("snapshot at %d differs from the state rebuilt from the log below it", sn.next)
		}
	}
	if len(p.snaps) < 5 {
		t.Fatalf("only %d snapshots taken", len(p.snaps))
	}

	// Reopen and load: the same state as the live one.
	live := p.st.Snapshot()
	if err := p.log.Close(); err != nil {
		t.Fatal(err)
	}
	p.open(producer.New(producer.Options{})) // placeholder until Load returns
	off, snap, ok, err := p.log.LatestProducerSnapshot()
	if err != nil || !ok {
		t.Fatalf("LatestProducerSnapshot after reopen: ok %v err %v", ok, err)
	}
	st, res, err := producer.Load(producer.Options{}, off, snap, 0, p.replay)
	if err != nil || res.SnapshotErr != nil || res.From != off {
		t.Fatalf("Load: %v %+v", err, res)
	}
	p.mu.Lock()
	p.st = st
	p.mu.Unlock()
	if !bytes.Equal(st.Snapshot(), live) {
		t.Fatal("state loaded after reopen differs from the live state before it")
	}
	for pid, l := range last {
		base, dup, err := p.produce(l.b)
		if err != nil || !dup || base != l.base {
			t.Fatalf("retry of pid %d after reopen: base %d dup %v err %v, want %d", pid, base, dup, err, l.base)
		}
		if _, _, err := p.produce(idemBatch(t, pid, 0, seq[pid], 1, ts)); err != nil {
			t.Fatalf("pid %d continues after reopen: %v", pid, err)
		}
	}
	if err := p.log.Close(); err != nil {
		t.Fatal(err)
	}
}

// idemBatch builds a valid uncompressed v2 batch of n small records from
// producer pid at epoch, starting at sequence seq, base offset 0, as an
// idempotent client sends it.
func idemBatch(tb testing.TB, pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	tb.Helper()
	var raw []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{
			OffsetDelta:      int32(i),
			TimestampDelta64: int64(i),
			Key:              fmt.Appendf(nil, "p%d-s%d", pid, int64(seq)+int64(i)),
			Value:            []byte("value"),
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		raw = r.AppendTo(raw)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                batch.Magic,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       ts,
		MaxTimestamp:         ts + int64(n-1),
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        seq,
		NumRecords:           int32(n),
		Records:              raw,
	}
	rb.Length = int32(len(raw) + batch.HeaderSize - 12)
	b := rb.AppendTo(nil)
	rb.CRC = int32(batch.Checksum(b))
	b = rb.AppendTo(b[:0])
	if _, err := batch.ParseHeader(b); err != nil {
		tb.Fatal(err)
	}
	return b
}
