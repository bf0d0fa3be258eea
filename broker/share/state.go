package share

import (
	"errors"
	"math"
	"sort"
)

// StateBatch is one run of offsets with one durable state and delivery
// count, as __share_group_state and the share-state RPCs
// (Read/WriteShareGroupState StateBatches) carry it. DeliveryState is
// Available, Acknowledged or Archived: Acquired is never durable, a lock
// does not survive its leader.
type StateBatch struct {
	FirstOffset   int64
	LastOffset    int64
	DeliveryState RecordState
	DeliveryCount int16
}

// PersistedState is the durable state of one share-partition: what
// ReadShareGroupState answers and what replaying __share_group_state
// rebuilds. Batches are ascending, disjoint and at or above StartOffset.
type PersistedState struct {
	SnapshotEpoch int32
	StateEpoch    int32
	LeaderEpoch   int32
	StartOffset   int64
	// DeliveryCompleteCount is the number of offsets at or above
	// StartOffset whose delivery is complete (KIP-1226), -1 if unknown.
	DeliveryCompleteCount int32
	Batches               []StateBatch
}

// durable is how a record's state is persisted: an acquired record is
// written as available with its delivery count (this delivery counts), so
// after a restart it is redelivered and the delivery limit still holds.
func durable(s RecordState) RecordState {
	if s == Acquired {
		return Available
	}
	return s
}

func (p *Partition) batches(lo, hi int64) []StateBatch {
	lo, hi = max(lo, p.start), min(hi, p.next()-1)
	var out []StateBatch
	for o := lo; o <= hi; o++ {
		r := p.recs[o-p.start]
		s := durable(r.state)
		if k := len(out) - 1; k >= 0 && out[k].DeliveryState == s && out[k].DeliveryCount == r.count {
			out[k].LastOffset = o
			continue
		}
		out = append(out, StateBatch{FirstOffset: o, LastOffset: o, DeliveryState: s, DeliveryCount: r.count})
	}
	return out
}

// Snapshot returns the partition's whole durable state (epochs zero; the
// caller sets them).
func (p *Partition) Snapshot() PersistedState {
	return PersistedState{StartOffset: p.start, DeliveryCompleteCount: p.completeCount(), Batches: p.batches(p.start, p.next()-1)}
}

func (p *Partition) completeCount() int32 {
	n := int32(0)
	for i := range p.recs {
		if p.recs[i].state.terminal() {
			n++
		}
	}
	return n
}

// Update is what changed since the last TakeUpdate, as a share-partition
// leader sends it in WriteShareGroupState: the start offset (-1 when it did
// not move) and the state batches of the changed offsets.
type Update struct {
	StartOffset           int64
	DeliveryCompleteCount int32
	Batches               []StateBatch
}

// TakeUpdate returns the changes since the previous call and forgets them;
// ok is false when nothing changed. Applying every update in order to the
// first snapshot ([PersistedState.Apply]) yields [Partition.Snapshot].
func (p *Partition) TakeUpdate() (u Update, ok bool) {
	if !p.dirty && !p.startDirty {
		return Update{}, false
	}
	u.StartOffset = -1
	u.DeliveryCompleteCount = p.completeCount()
	if p.startDirty {
		u.StartOffset = p.start
	}
	if p.dirty {
		u.Batches = p.batches(p.dirtyLo, p.dirtyHi)
	}
	p.dirty, p.startDirty = false, false
	return u, true
}

// Apply merges an update into the state the way Kafka's share coordinator
// combines a ShareUpdate with its snapshot: the start offset moves when
// set, the update's batches replace the offsets they cover, and batches
// below the start offset are dropped.
func (s *PersistedState) Apply(u Update) {
	if u.StartOffset >= 0 {
		s.StartOffset = u.StartOffset
	}
	s.DeliveryCompleteCount = u.DeliveryCompleteCount
	s.Batches = combine(s.Batches, u.Batches, s.StartOffset)
}

// combine overlays newer batches on older ones (newer wins per offset),
// clips everything below start, and coalesces adjacent equal runs.
func combine(older, newer []StateBatch, start int64) []StateBatch {
	nw := append([]StateBatch(nil), newer...)
	sort.Slice(nw, func(i, j int) bool { return nw[i].FirstOffset < nw[j].FirstOffset })
	var out []StateBatch
	for _, b := range older {
		// Subtract every newer interval from b.
		pieces := []StateBatch{b}
		for _, n := range nw {
			var next []StateBatch
			for _, x := range pieces {
				if n.LastOffset < x.FirstOffset || n.FirstOffset > x.LastOffset {
					next = append(next, x)
					continue
				}
				if x.FirstOffset < n.FirstOffset {
					y := x
					y.LastOffset = n.FirstOffset - 1
					next = append(next, y)
				}
				if x.LastOffset > n.LastOffset {
					y := x
					y.FirstOffset = n.LastOffset + 1
					next = append(next, y)
				}
			}
			pieces = next
		}
		out = append(out, pieces...)
	}
	out = append(out, nw...)
	sort.Slice(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	var res []StateBatch
	for _, b := range out {
		if b.LastOffset < start {
			continue
		}
		b.FirstOffset = max(b.FirstOffset, start)
		if k := len(res) - 1; k >= 0 && res[k].LastOffset+1 == b.FirstOffset &&
			res[k].DeliveryState == b.DeliveryState && res[k].DeliveryCount == b.DeliveryCount {
			res[k].LastOffset = b.LastOffset
			continue
		}
		res = append(res, b)
	}
	return res
}

// Restore rebuilds a share-partition from its durable state, as a new
// leader does after ReadShareGroupState: the window runs from the start
// offset to the last persisted batch; acknowledged and archived records
// stay done, everything else (available or acquired when written, and
// offsets no batch covers) is available with its delivery count, so
// records that were acquired but not acknowledged are delivered again.
// It refuses (ErrBadState) a state whose window is wider than
// MaxRestoreWindow, which no leader writes, rather than allocate it.
func Restore(cfg Config, st PersistedState) (*Partition, error) {
	if st.StartOffset < 0 || st.StartOffset > math.MaxInt64-MaxRestoreWindow {
		return nil, ErrBadState
	}
	p := New(cfg, st.StartOffset)
	for _, b := range st.Batches {
		if b.LastOffset < b.FirstOffset || b.LastOffset >= p.start+MaxRestoreWindow {
			return nil, ErrBadState
		}
	}
	for _, b := range st.Batches {
		if b.LastOffset < p.start {
			continue
		}
		for o := max(b.FirstOffset, p.start); o <= b.LastOffset; o++ {
			for p.next() < o {
				p.recs = append(p.recs, record{state: Available})
			}
			s := b.DeliveryState
			if !s.terminal() {
				s = Available
			}
			if o == p.next() {
				p.recs = append(p.recs, record{state: s, count: b.DeliveryCount})
			} else { // overlapping batches in a bad state: the later one wins
				p.recs[o-p.start] = record{state: s, count: b.DeliveryCount}
			}
		}
	}
	p.advance()
	p.startDirty = false
	return p, nil
}

// MaxRestoreWindow bounds the in-flight window [Restore] rebuilds.
const MaxRestoreWindow = 1 << 22

// ErrBadState is returned by [Restore] for a durable state no leader
// writes.
var ErrBadState = errors.New("share: bad share-partition state")

// InFlight counts the offsets of st delivered at least once and not yet
// acknowledged or archived: available with a delivery count (an acquired
// record is durable as available with its count), at or above the start
// offset.
func InFlight(st PersistedState) int {
	n := 0
	for _, b := range st.Batches {
		if b.DeliveryState == Available && b.DeliveryCount > 0 && b.LastOffset >= st.StartOffset {
			n += int(b.LastOffset - max(b.FirstOffset, st.StartOffset) + 1)
		}
	}
	return n
}
