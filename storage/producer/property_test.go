package producer

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-io/strata/internal/batch"
)

// model is the simplest statement of the rules, written independently of
// State: each producer keeps every batch of its current epoch in a growing
// list, sequences wrap by arithmetic modulo 2^31, and a duplicate is looked
// for among the list's last five.
type model map[int64]*modelProducer

type modelProducer struct {
	epoch   int16
	batches []BatchMeta
}

func modelLastSeq(seq, delta int32) int32 { return int32((int64(seq) + int64(delta)) % (1 << 31)) }

func (m model) check(h batch.Header) (*BatchMeta, string) {
	if h.ProducerID < 0 {
		return nil, "ok"
	}
	if h.BaseSequence < 0 || h.LastOffsetDelta < 0 {
		return nil, "invalid-sequence"
	}
	mp := m[h.ProducerID]
	if mp == nil {
		return nil, "ok"
	}
	if h.ProducerEpoch == mp.epoch {
		last := modelLastSeq(h.BaseSequence, h.LastOffsetDelta)
		for i := max(0, len(mp.batches)-5); i < len(mp.batches); i++ {
			if b := mp.batches[i]; b.FirstSeq == h.BaseSequence && b.LastSeq == last {
				return &b, "ok"
			}
		}
	}
	switch {
	case h.ProducerEpoch < mp.epoch:
		return nil, "invalid-epoch"
	case h.ProducerEpoch > mp.epoch:
		if h.BaseSequence != 0 {
			return nil, "out-of-order"
		}
		return nil, "ok"
	}
	want := int32(0)
	if n := len(mp.batches); n > 0 {
		want = modelLastSeq(mp.batches[n-1].LastSeq, 1)
	}
	if h.BaseSequence != want {
		return nil, "out-of-order"
	}
	return nil, "ok"
}

func (m model) apply(h batch.Header, base, now int64) {
	if h.ProducerID < 0 {
		return
	}
	mp := m[h.ProducerID]
	if mp == nil || mp.epoch != h.ProducerEpoch {
		mp = &modelProducer{epoch: h.ProducerEpoch}
		m[h.ProducerID] = mp
	}
	mp.batches = append(mp.batches, BatchMeta{
		FirstSeq: h.BaseSequence, LastSeq: modelLastSeq(h.BaseSequence, h.LastOffsetDelta),
		FirstOffset: base, LastOffset: base + int64(h.LastOffsetDelta), Timestamp: now,
	})
}

func (m model) clone() model {
	c := make(model, len(m))
	for id, mp := range m {
		c[id] = &modelProducer{epoch: mp.epoch, batches: append([]BatchMeta(nil), mp.batches...)}
	}
	return c
}

// simProducer is an idempotent client: up to five batches in flight, sent
// in any order, acknowledgements that may be lost (so the batch is sent
// again), epoch bumps, and zombie batches from an older epoch.
type simProducer struct {
	id       int64
	epoch    int16
	nextSeq  int32
	inflight []batch.Header
	zombies  []batch.Header // unacknowledged batches of older epochs
}

type batchKey struct {
	pid         int64
	epoch       int16
	first, last int32
}

func keyOf(h batch.Header) batchKey {
	return batchKey{h.ProducerID, h.ProducerEpoch, h.BaseSequence, modelLastSeq(h.BaseSequence, h.LastOffsetDelta)}
}

// TestPropertyRandomIdempotentProducersMatchModel drives a State with
// random idempotent traffic (reordered sends, retries after lost acks,
// duplicates, epoch bumps, zombies, multi-batch requests that abort,
// snapshot round trips, expiry) and checks, at every step, that each Check
// answers as the model does and that the table equals the model's last
// five batches; at the end, that the log holds each producer epoch's
// sequences exactly once and in order, and every acknowledgement of a
// batch names the offsets it was written at.
func TestPropertyRandomIdempotentProducersMatchModel(t *testing.T) {
	seeds, steps := 300, 400
	if testing.Short() {
		seeds = 50
	}
	var seen outcomes
	for seed := 0; seed < seeds; seed++ {
		runProperty(t, uint64(seed), steps, &seen)
		if t.Failed() {
			return
		}
	}
	t.Logf("outcomes: %+v", seen)
	// The traffic must reach every rule, or the test proves little.
	if seen.appended == 0 || seen.dups == 0 || seen.outOfOrder == 0 || seen.fenced == 0 ||
		seen.unknown == 0 || seen.wrapped == 0 || seen.txAborted == 0 || seen.txCommitted == 0 ||
		seen.expired == 0 || seen.newEpoch == 0 {
		t.Fatalf("some rule was never exercised: %+v", seen)
	}
}

// outcomes counts what the random traffic exercised.
type outcomes struct {
	appended, dups, outOfOrder, fenced, unknown, wrapped, newEpoch int
	txCommitted, txAborted, expired                                int
}

func runProperty(t *testing.T, seed uint64, steps int, seen *outcomes) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	p := newPartition(Options{ExpirationMs: 10_000})
	m := model{}
	acks := map[batchKey]int64{}
	// unknownAt holds the offsets of batches appended while their producer
	// was unknown: the only places a sequence may jump.
	unknownAt := map[int64]bool{}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: "+format, append([]any{seed}, args...)...)
	}

	var prods []*simProducer
	for i := 0; i < 3; i++ {
		sp := &simProducer{id: int64(i * 1000)}
		switch rng.IntN(3) {
		case 1:
			sp.nextSeq = math.MaxInt32 - int32(rng.IntN(8)) // wraps soon
		case 2:
			sp.nextSeq = int32(rng.IntN(1 << 20)) // a producer this partition has never seen
		}
		prods = append(prods, sp)
	}

	// send runs one produce request of the given batches, compares every
	// Check with the model, and acknowledges (or not) the batches.
	send := func(sp *simProducer, hs []batch.Header, failAppend bool) {
		staged := m.clone()
		before := p.st.Snapshot()
		tx := p.st.Begin()
		next := p.next
		ok := true
		for _, h := range hs {
			dup, err := tx.Check(h)
			mdup, mkind := staged.check(h)
			if kind := errKind(err); kind != mkind || (dup == nil) != (mdup == nil) || (dup != nil && *dup != *mdup) {
				fail("pid %d epoch %d seq %d+%d: Check = %v %v, model %v %s", h.ProducerID, h.ProducerEpoch,
					h.BaseSequence, h.LastOffsetDelta, dup, err, mdup, mkind)
			}
			switch mkind {
			case "out-of-order":
				seen.outOfOrder++
			case "invalid-epoch":
				seen.fenced++
			}
			if dup != nil {
				seen.dups++
				if len(hs) == 1 { // the single-batch path acknowledges the duplicate
					k := keyOf(h)
					if base, seen := acks[k]; !seen || base != dup.FirstOffset {
						fail("duplicate %+v acknowledged at %d, first acknowledged at %d (seen %v)", k, dup.FirstOffset, base, seen)
					}
					sp.dropInflight(k)
				}
				ok = false
				break
			}
			if err != nil {
				ok = false
				break
			}
			tx.Update(h, next, p.now)
			staged.apply(h, next, p.now)
			next += int64(h.LastOffsetDelta) + 1
		}
		// A roll inside the append, before the write, snapshots the state
		// before the Tx; one after the write, the state after Commit.
		if got := p.st.SnapshotAt(p.next); !bytes.Equal(got, before) {
			fail("SnapshotAt(%d) inside a Tx is not the state before it", p.next)
		}
		after := p.st.SnapshotAt(next)
		if !ok || failAppend {
			if len(hs) > 1 {
				seen.txAborted++
			}
			tx.Abort()
			return
		}
		tx.Commit()
		if !bytes.Equal(after, p.st.Snapshot()) {
			fail("SnapshotAt(%d) before Commit is not the committed state", next)
		}
		if len(hs) > 1 {
			seen.txCommitted++
		}
		for _, h := range hs {
			mp := m[h.ProducerID]
			unknown := mp == nil
			switch {
			case unknown:
				unknownAt[p.next] = true
				seen.unknown++
			case mp.epoch != h.ProducerEpoch:
				seen.newEpoch++
			}
			if modelLastSeq(h.BaseSequence, h.LastOffsetDelta) < h.BaseSequence {
				seen.wrapped++
			}
			seen.appended++
			m.apply(h, p.next, p.now) // as staged did, at the same offsets

			h.BaseOffset = p.next
			p.log = append(p.log, appended{h: h, base: p.next})
			k := keyOf(h)
			if _, seen := acks[k]; seen && !unknown {
				fail("batch %+v appended twice", k)
			}
			acks[k] = p.next
			p.next += int64(h.LastOffsetDelta) + 1
			if rng.IntN(5) != 0 { // else the ack is lost: the batch stays in flight and is retried
				sp.dropInflight(k)
			}
		}
	}

	for step := 0; step < steps; step++ {
		sp := prods[rng.IntN(len(prods))]
		switch r := rng.IntN(100); {
		case r < 30 && len(sp.inflight) < 5:
			n := int32(1 + rng.IntN(4))
			sp.inflight = append(sp.inflight, hdr(sp.id, sp.epoch, sp.nextSeq, n))
			sp.nextSeq = incSeqModel(sp.nextSeq, n)
		case r < 75 && len(sp.inflight) > 0:
			// Mostly the oldest batch, sometimes any: reordering.
			i := 0
			if rng.IntN(3) == 0 {
				i = rng.IntN(len(sp.inflight))
			}
			send(sp, []batch.Header{sp.inflight[i]}, rng.IntN(20) == 0)
		case r < 82 && len(sp.inflight) > 1:
			// A multi-batch request of in-flight batches in order, whose
			// append sometimes fails.
			n := 2 + rng.IntN(len(sp.inflight)-1)
			send(sp, append([]batch.Header(nil), sp.inflight[:n]...), rng.IntN(4) == 0)
		case r < 85:
			// Epoch bump (a producer reset): unsent batches become zombies.
			sp.zombies = append(sp.zombies, sp.inflight...)
			sp.inflight = nil
			sp.epoch++
			sp.nextSeq = 0
		case r < 88 && len(sp.zombies) > 0:
			send(sp, []batch.Header{sp.zombies[rng.IntN(len(sp.zombies))]}, false)
		case r < 90:
			// A buggy client: a batch at a random sequence.
			send(sp, []batch.Header{hdr(sp.id, sp.epoch+int16(rng.IntN(10)/9), int32(rng.IntN(50)), 1)}, false)
		case r < 93:
			// Snapshot round trip, as across a restart.
			snap := p.st.Snapshot()
			r := New(Options{ExpirationMs: 10_000})
			if err := r.Restore(snap); err != nil {
				fail("restore: %v", err)
			}
			if !bytes.Equal(r.Snapshot(), snap) {
				fail("snapshot not stable across restore")
			}
			p.st = r
		case r < 95:
			// Time passes, but never so far that a producer with a batch
			// in flight expires: a retry after expiry is accepted again,
			// by design, as in Kafka.
			adv := int64(rng.IntN(12_000))
			for _, o := range prods {
				if mp := m[o.id]; mp != nil && len(o.inflight)+len(o.zombies) > 0 {
					adv = min(adv, mp.batches[len(mp.batches)-1].Timestamp+10_000-1-p.now)
				}
			}
			p.now += max(adv, 0)
			seen.expired += p.st.RemoveExpired(p.now)
			for id, mp := range m {
				if p.now-mp.batches[len(mp.batches)-1].Timestamp >= 10_000 {
					delete(m, id)
				}
			}
		}
		compareWithModel(t, seed, step, p.st, m)
	}
	checkLog(t, seed, p.log, unknownAt)
	compareWithModel(t, seed, steps, p.st, m)
}

func (sp *simProducer) dropInflight(k batchKey) {
	for i, h := range sp.inflight {
		if keyOf(h) == k {
			sp.inflight = append(sp.inflight[:i], sp.inflight[i+1:]...)
			return
		}
	}
	for i, h := range sp.zombies {
		if keyOf(h) == k {
			sp.zombies = append(sp.zombies[:i], sp.zombies[i+1:]...)
			return
		}
	}
}

// incSeqModel is the sequence after a batch of n records starting at seq.
func incSeqModel(seq, n int32) int32 { return modelLastSeq(seq, n) }

// compareWithModel checks that the table holds exactly the model's
// producers, epochs and last five batches.
func compareWithModel(t *testing.T, seed uint64, step int, s *State, m model) {
	t.Helper()
	if s.Producers() != len(m) {
		t.Fatalf("seed %d step %d: %d producers, model %d", seed, step, s.Producers(), len(m))
	}
	for id, mp := range m {
		pr, ok := s.Entry(id)
		want := mp.batches[max(0, len(mp.batches)-5):]
		if !ok || pr.Epoch != mp.epoch || !equalBatches(pr.Batches, want) {
			t.Fatalf("seed %d step %d: producer %d = %+v, model epoch %d batches %v", seed, step, id, pr, mp.epoch, want)
		}
	}
}

func equalBatches(a, b []BatchMeta) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkLog: within each producer epoch, the appended batches' sequences
// follow one another without gap or repeat, and offsets never overlap.
func checkLog(t *testing.T, seed uint64, log []appended, unknownAt map[int64]bool) {
	t.Helper()
	type pe struct {
		pid   int64
		epoch int16
	}
	last := map[pe]int32{}
	end := int64(0)
	for _, a := range log {
		if a.base != end {
			t.Fatalf("seed %d: batch at %d, log end %d", seed, a.base, end)
		}
		end = a.base + int64(a.h.LastOffsetDelta) + 1
		k := pe{a.h.ProducerID, a.h.ProducerEpoch}
		if l, ok := last[k]; ok && !unknownAt[a.base] && a.h.BaseSequence != modelLastSeq(l, 1) {
			t.Fatalf("seed %d: producer %d epoch %d: sequence %d after %d at offset %d", seed, k.pid, k.epoch, a.h.BaseSequence, l, a.base)
		}
		last[k] = modelLastSeq(a.h.BaseSequence, a.h.LastOffsetDelta)
	}
}
