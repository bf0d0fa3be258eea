package group

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// TestStoreTxnOffsetsMatchModel: random interleavings of plain commits,
// transactional commits of several producers, their COMMIT and ABORT
// markers, OffsetDelete tombstones and loads, checked after every step
// against a model of Kafka's rule read off the log alone: a key's
// committed offset is its newest effective record (a plain commit, a
// tombstone, or a transactional commit whose producer's next marker is a
// COMMIT); a transactional record with no marker after it yet and no
// tombstone after it is pending. Both the live store and one reloaded
// from the log must equal the model.
func TestStoreTxnOffsetsMatchModel(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { modelRun(t, seed, 80) })
	}
}

type modelEvent struct {
	at     int64
	kind   string // "plain", "txn", "tomb", "commit", "abort"
	pid    int64
	group  string
	tp     TopicPartition
	offset int64
}

func modelRun(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	h := &txnHarness{t: t, ml: &memLog{}, now: 1000}
	h.s = NewStore(StoreOptions{Append: h.ml.append, Now: h.clock})
	ctx := context.Background()
	var log []modelEvent
	groups := []string{"a", "b"}
	tps := []TopicPartition{{"t", 0}, {"t", 1}, {"u", 0}}
	open := map[int64]bool{} // producers with a transaction written since their last marker
	next := func() int64 { return h.ml.next[txnPart] }
	var value int64
	for i := 0; i < ops; i++ {
		g, tp := groups[rng.IntN(len(groups))], tps[rng.IntN(len(tps))]
		value++
		op := rng.IntN(10)
		switch {
		case op < 3:
			at := next()
			if err := h.s.Commit(ctx, txnPart, g, []Commit{{tp, Offset{Offset: value, LeaderEpoch: -1, ExpireTimestamp: -1}}}); err != nil {
				t.Fatal(err)
			}
			log = append(log, modelEvent{at: at, kind: "plain", group: g, tp: tp, offset: value})
		case op < 6:
			pid := int64(rng.IntN(3))
			at := next()
			if err := h.s.CommitTxn(ctx, txnPart, g, pid, 0, []Commit{{tp, Offset{Offset: value, LeaderEpoch: -1, ExpireTimestamp: -1}}}); err != nil {
				t.Fatal(err)
			}
			log = append(log, modelEvent{at: at, kind: "txn", pid: pid, group: g, tp: tp, offset: value})
			open[pid] = true
		case op < 8:
			pid := int64(rng.IntN(3))
			commit := rng.IntN(2) == 0
			at := h.appendMarker(pid, commit)
			h.s.CompleteTxn(txnPart, pid, commit, next())
			kind := "abort"
			if commit {
				kind = "commit"
			}
			log = append(log, modelEvent{at: at, kind: kind, pid: pid})
			delete(open, pid)
		case op < 9:
			had := h.s.hasAny(g, tp)
			at := next()
			if err := h.s.DeleteOffsets(ctx, txnPart, g, []TopicPartition{tp}); err != nil {
				t.Fatal(err)
			}
			if had {
				log = append(log, modelEvent{at: at, kind: "tomb", group: g, tp: tp})
			}
		default:
			s, _ := h.ml.reload(t, txnPart, h.clock)
			h.s = s
		}
		want := modelState(log)
		if got := h.state(); got != want {
			t.Fatalf("step %d: live store\n%s\nwant (model)\n%s\nlog %+v", i, got, want, log)
		}
		live := h.s
		s, _ := h.ml.reload(t, txnPart, h.clock)
		h.s = s
		if got := h.state(); got != want {
			t.Fatalf("step %d: reloaded store\n%s\nwant (model)\n%s", i, got, want)
		}
		h.s = live
	}
}

// hasAny reports whether group has a committed or pending offset of tp
// (OffsetDelete writes a tombstone only then).
func (s *Store) hasAny(group string, tp TopicPartition) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.offsets[group][tp]
	return ok || s.pendingTPsLocked(group)[tp]
}

// modelState computes the store's expected state (in txnHarness.state's
// format) from the log alone.
func modelState(log []modelEvent) string {
	type key struct {
		group string
		tp    TopicPartition
	}
	// The outcome of each transactional record: its producer's next marker.
	outcome := make([]string, len(log))
	for i, e := range log {
		if e.kind != "txn" {
			continue
		}
		outcome[i] = "open"
		for _, m := range log[i+1:] {
			if (m.kind == "commit" || m.kind == "abort") && m.pid == e.pid {
				outcome[i] = m.kind
				break
			}
		}
	}
	newest := map[key]modelEvent{}
	has := map[key]bool{}
	for i, e := range log {
		k := key{e.group, e.tp}
		effective := e.kind == "plain" || e.kind == "tomb" || (e.kind == "txn" && outcome[i] == "commit")
		if effective && (!has[k] || newest[k].at < e.at) {
			newest[k], has[k] = e, true
		}
	}
	var lines []string
	for k, e := range newest {
		if e.kind != "tomb" {
			lines = append(lines, fmt.Sprintf("committed %s %s/%d = %d (record %d)", k.group, k.tp.Topic, k.tp.Partition, e.offset, e.at))
		}
	}
	for i, e := range log {
		if e.kind != "txn" || outcome[i] != "open" {
			continue
		}
		dropped := false
		for _, d := range log[i+1:] {
			if d.kind == "tomb" && d.group == e.group && d.tp == e.tp {
				dropped = true
			}
		}
		// A newer pending record of the same producer and key replaces it.
		for _, d := range log[i+1:] {
			if d.kind == "txn" && d.pid == e.pid && d.group == e.group && d.tp == e.tp {
				dropped = true
			}
		}
		if !dropped {
			lines = append(lines, fmt.Sprintf("pending p%d pid=%d %s %s/%d = %d (record %d)", txnPart, e.pid, e.group, e.tp.Topic, e.tp.Partition, e.offset, e.at))
		}
	}
	if len(lines) == 0 {
		return "empty\n"
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}
