package producer

import "github.com/strata-io/strata/internal/batch"

// Tx groups the updates of one produce request so that they can be undone
// if a later batch of the request fails its check or the log append fails:
//
//	tx := s.Begin()
//	next := log.LogEndOffset()
//	for _, h := range headers { // in request order
//		dup, err := tx.Check(h) // sees the earlier batches' updates
//		if err != nil || dup != nil {
//			tx.Abort() // answer err, or ack dup's offsets; append nothing
//			return
//		}
//		tx.Update(h, next, now)
//		next += int64(h.LastOffsetDelta) + 1
//	}
//	if _, err := log.Append(records, opts); err != nil {
//		tx.Abort()
//		return
//	}
//	tx.Commit()
//
// A Tx applies its updates to the State at once and keeps an undo record
// of each producer entry it touches (a copy of the entry as it was before
// the Tx's first change), so [Tx.Check] sees the request's earlier batches
// and [Tx.Abort] puts every touched entry back and removes the entries the
// Tx created. Kafka allows one batch per partition in a v3+ produce
// request, so the common Tx holds one batch; the mechanism costs nothing
// more for several.
//
// A State has one Tx, reused: [State.Begin] returns it and panics if it is
// still open. While it is open, only its own methods may change the
// State: [State.Update], [State.TruncateTo] and [State.Restore] panic;
// [State.RemoveExpired] spares the producers the Tx touched. [State.Check]
// and [State.Snapshot] see the Tx's updates; [State.SnapshotAt] sees those
// below its offset.
type Tx struct {
	s    *State
	open bool
	undo []undoRecord // reused between transactions
}

type undoRecord struct {
	id      int64
	existed bool
	old     entry
}

// Begin opens the State's [Tx].
func (s *State) Begin() *Tx {
	if s.tx.open {
		panic("producer: Begin called while a Tx is open")
	}
	s.tx.open = true
	return &s.tx
}

// Check is [State.Check] against the State as the Tx has changed it.
func (t *Tx) Check(h batch.Header) (*BatchMeta, error) {
	t.mustBeOpen()
	return t.s.Check(h)
}

// Update is [State.Update] inside the Tx: applied now, undone by
// [Tx.Abort].
func (t *Tx) Update(h batch.Header, firstOffset, appendTime int64) {
	t.mustBeOpen()
	if !h.HasProducerID() {
		return
	}
	if t.record(h.ProducerID) == nil {
		r := undoRecord{id: h.ProducerID}
		if e := t.s.producers[h.ProducerID]; e != nil {
			r.existed = true
			r.old = *e
		}
		t.undo = append(t.undo, r)
	}
	t.s.update(h, firstOffset, appendTime)
}

// record returns the Tx's undo record for id, or nil (also when the Tx
// is not open).
func (t *Tx) record(id int64) *undoRecord {
	if !t.open {
		return nil
	}
	for i := range t.undo {
		if t.undo[i].id == id {
			return &t.undo[i]
		}
	}
	return nil
}

// Commit keeps the Tx's updates and closes it.
func (t *Tx) Commit() {
	t.mustBeOpen()
	t.undo = t.undo[:0]
	t.open = false
}

// Abort undoes the Tx's updates and closes it. Aborting a closed Tx does
// nothing, so `defer tx.Abort()` after Begin is safe.
func (t *Tx) Abort() {
	if !t.open {
		return
	}
	for i := len(t.undo) - 1; i >= 0; i-- {
		r := &t.undo[i]
		if !r.existed {
			delete(t.s.producers, r.id)
			continue
		}
		// Update changes entries in place and nothing removes one while
		// the Tx is open, so the map still holds the same pointer.
		*t.s.producers[r.id] = r.old
	}
	t.undo = t.undo[:0]
	t.open = false
}

func (t *Tx) mustBeOpen() {
	if !t.open {
		panic("producer: Tx used after Commit or Abort")
	}
}
