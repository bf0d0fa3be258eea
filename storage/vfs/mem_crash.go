package vfs

// Clones of a MemFS: Clone (everything, durable or not) and CrashClone /
// CrashCloneReordered (what a power loss would leave, by the model
// described on MemFS in mem.go), with the per-file content a crash keeps.

import (
	"math/rand/v2"
	"sort"
)

// Clone returns an exact copy of the file system, including what is not
// yet durable, so several crashes can be taken from one moment. Open
// handles and mappings are not carried over.
func (m *MemFS) Clone() *MemFS {
	m.mu.Lock() // pull mutates detached mappings' nodes
	defer m.mu.Unlock()
	c := &cloner{old: map[*memNode]*memNode{}}
	out := &MemFS{root: c.node(m.root)}
	out.free.Store(m.free.Load())
	for _, op := range m.pending {
		nop := &dirOp{}
		for _, e := range op.effects {
			ne := dirEffect{dir: c.node(e.dir), name: e.name}
			if e.node != nil {
				ne.node = c.node(e.node)
			}
			nop.effects = append(nop.effects, ne)
		}
		out.pending = append(out.pending, nop)
	}
	return out
}

type cloner struct{ old map[*memNode]*memNode }

func (c *cloner) node(n *memNode) *memNode {
	if nn, ok := c.old[n]; ok {
		return nn
	}
	nn := &memNode{dir: n.dir, modTime: n.modTime}
	c.old[n] = nn
	if n.dir {
		nn.entries = make(map[string]*memNode, len(n.entries))
		nn.durable = make(map[string]*memNode, len(n.durable))
		for k, v := range n.entries {
			nn.entries[k] = c.node(v)
		}
		for k, v := range n.durable {
			nn.durable[k] = c.node(v)
		}
		return nn
	}
	n.pullLocked()
	nn.data = clone(n.data)
	nn.synced = clone(n.synced)
	nn.mapDirty = n.mapDirty
	nn.ops = make([]memOp, len(n.ops))
	for i, op := range n.ops {
		nn.ops[i] = memOp{off: op.off, data: clone(op.data), trunc: op.trunc, size: op.size}
	}
	return nn
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// CrashClone returns a new file system holding what a power loss at this
// moment would leave behind (see [MemFS] for the model). keepUnsyncedPct
// (0..100) sets how much of what was never synced survives: 0 keeps only
// synced bytes and entries, 100 keeps everything; in between each file
// keeps a random prefix of its unsynced writes, on average about
// keepUnsyncedPct percent of their bytes, and each pending namespace
// operation survives with probability keepUnsyncedPct percent.
//
// In the clone everything is durable and nothing is open. The receiver is
// unchanged.
func (m *MemFS) CrashClone(keepUnsyncedPct int, rng *rand.Rand) *MemFS {
	return m.crashClone(keepUnsyncedPct, rng, false)
}

// CrashCloneReordered is [MemFS.CrashClone] under a harsher model of file
// contents, closer to a disk whose write-back reorders: every 4 KiB page
// that changed since the file's last Sync independently keeps its new or
// its synced contents (with probability keepUnsyncedPct percent for the
// new), and the file's size is its size after a random prefix of the
// unsynced writes and truncations, so a later page can survive while an
// earlier one is lost, leaving a hole of old bytes or zeros in the middle.
// Directory entries follow the CrashClone model.
func (m *MemFS) CrashCloneReordered(keepUnsyncedPct int, rng *rand.Rand) *MemFS {
	return m.crashClone(keepUnsyncedPct, rng, true)
}

func (m *MemFS) crashClone(keepUnsyncedPct int, rng *rand.Rand, reorder bool) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	pct := min(max(keepUnsyncedPct, 0), 100)
	keep := func() bool {
		return pct >= 100 || (pct > 0 && rng.IntN(100) < pct)
	}

	// The directory entries as found after the crash: durable ones, then
	// the surviving pending operations in issue order.
	after := map[*memNode]map[string]*memNode{}
	var entries func(d *memNode) map[string]*memNode
	entries = func(d *memNode) map[string]*memNode {
		e, ok := after[d]
		if !ok {
			e = make(map[string]*memNode, len(d.durable))
			for k, v := range d.durable {
				e[k] = v
			}
			after[d] = e
		}
		return e
	}
	for _, op := range m.pending {
		if !keep() {
			continue
		}
		for _, ef := range op.effects {
			e := entries(ef.dir)
			if ef.node == nil {
				delete(e, ef.name)
			} else {
				e[ef.name] = ef.node
			}
		}
	}

	built := map[*memNode]*memNode{}
	var build func(n *memNode) *memNode
	build = func(n *memNode) *memNode {
		if nn, ok := built[n]; ok {
			return nn
		}
		if n.dir {
			nn := newMemDir()
			nn.modTime = n.modTime
			built[n] = nn
			// Sorted, so a seeded rng tears the same files the same way.
			e := entries(n)
			names := make([]string, 0, len(e))
			for k := range e {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				c := build(e[k])
				nn.entries[k] = c
				nn.durable[k] = c
			}
			return nn
		}
		var data []byte
		if reorder {
			data = n.crashPagesLocked(pct, rng)
		} else {
			data = n.crashContentLocked(pct, rng)
		}
		nn := &memNode{modTime: n.modTime, data: data, synced: clone(data)}
		built[n] = nn
		return nn
	}
	out := &MemFS{root: build(m.root)}
	out.free.Store(m.free.Load())
	return out
}

// crashContentLocked computes a file's contents after a crash.
func (n *memNode) crashContentLocked(pct int, rng *rand.Rand) []byte {
	n.pullLocked()
	out := clone(n.synced)
	if pct <= 0 {
		return out
	}
	var total int64
	for _, op := range n.ops {
		total += int64(len(op.data))
	}
	// The budget is uniform on an interval whose mean is pct% of the
	// unsynced bytes: [0, 2·pct%] up to 50%, [2·pct%-100%, 100%] above.
	budget := total
	if pct < 100 && total > 0 {
		lo, hi := int64(0), 2*total*int64(pct)/100
		if pct > 50 {
			lo, hi = (2*int64(pct)-100)*total/100, total
		}
		budget = lo + rng.Int64N(hi-lo+1)
	}
	for _, op := range n.ops {
		if op.trunc {
			out = resize(out, op.size)
			continue
		}
		d := op.data
		if int64(len(d)) > budget {
			d = d[:budget] // torn
		}
		out = writeAt(out, d, op.off)
		budget -= int64(len(d))
		if len(d) < len(op.data) {
			break
		}
	}
	if n.mapDirty {
		// Pages dirtied through a mapping are written back independently.
		full := clone(n.synced)
		for _, op := range n.ops {
			if op.trunc {
				full = resize(full, op.size)
			} else {
				full = writeAt(full, op.data, op.off)
			}
		}
		for p := 0; p < len(n.data) && p < len(out); p += memPageSize {
			e := min(p+memPageSize, len(n.data), len(out))
			var was []byte
			if p < len(full) {
				was = full[p:min(e, len(full))]
			}
			if string(n.data[p:e]) != string(was) && (pct >= 100 || rng.IntN(100) < pct) {
				copy(out[p:e], n.data[p:e])
			}
		}
	}
	return out
}

// crashPagesLocked computes a file's contents after a crash under the
// reordering model of CrashCloneReordered.
func (n *memNode) crashPagesLocked(pct int, rng *rand.Rand) []byte {
	n.pullLocked()
	if pct <= 0 || (len(n.ops) == 0 && !n.mapDirty) {
		return clone(n.synced)
	}
	if pct >= 100 {
		return clone(n.data)
	}
	// The size: as after the first k unsynced operations.
	size := int64(len(n.synced))
	k := rng.IntN(len(n.ops) + 1)
	for _, op := range n.ops[:k] {
		if op.trunc {
			size = op.size
		} else {
			size = max(size, op.off+int64(len(op.data)))
		}
	}
	out := make([]byte, size)
	copy(out, n.synced)
	for p := int64(0); p < size; p += memPageSize {
		e := min(p+memPageSize, size)
		var cur, old []byte
		if p < int64(len(n.data)) {
			cur = n.data[p:min(e, int64(len(n.data)))]
		}
		if p < int64(len(n.synced)) {
			old = n.synced[p:min(e, int64(len(n.synced)))]
		}
		if string(cur) == string(old) || rng.IntN(100) >= pct {
			continue // the page as synced (or zeros past the synced end)
		}
		clear(out[p:e])
		copy(out[p:e], cur)
	}
	return out
}
