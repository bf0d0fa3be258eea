package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// Test timings: 10ms ticks, elections after 10 ticks (100-200ms).
const (
	testTick          = 10 * time.Millisecond
	testElectionTicks = 10
	testWait          = 5 * time.Second
)

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// logFSM is a test FSM: the list of payloads applied, in order, and the
// index of each.
type logFSM struct {
	mu      sync.Mutex
	Entries []string
	Index   uint64
}

func (f *logFSM) Apply(index uint64, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(data) > 0 {
		f.Entries = append(f.Entries, string(data))
	}
	f.Index = index
	return nil
}

func (f *logFSM) Snapshot() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return json.Marshal(f)
}

func (f *logFSM) Restore(index uint64, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Entries = nil
	if err := json.Unmarshal(data, f); err != nil {
		return err
	}
	if f.Index != index {
		return fmt.Errorf("snapshot index %d, restore at %d", f.Index, index)
	}
	return nil
}

func (f *logFSM) entries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.Entries...)
}

// nodeCluster is N bare raft nodes (no metadata) on a SimNetwork, each
// with a MemoryStorage that survives its node's restart like a disk.
type nodeCluster struct {
	t        testing.TB
	net      *SimNetwork
	ids      []uint64
	storages map[uint64]*MemoryStorage
	fsms     map[uint64]*logFSM
	nodes    map[uint64]*node
	snapN    uint64
}

func newNodeCluster(t testing.TB, n int, snapEntries uint64) *nodeCluster {
	c := &nodeCluster{
		t:        t,
		net:      NewSimNetwork(1),
		storages: map[uint64]*MemoryStorage{},
		fsms:     map[uint64]*logFSM{},
		nodes:    map[uint64]*node{},
		snapN:    snapEntries,
	}
	for i := 1; i <= n; i++ {
		c.ids = append(c.ids, uint64(i))
		c.storages[uint64(i)] = NewMemoryStorage()
	}
	for _, id := range c.ids {
		c.start(id)
	}
	t.Cleanup(func() {
		for _, id := range c.ids {
			c.stop(id)
		}
		c.net.Close()
	})
	return c
}

func (c *nodeCluster) start(id uint64) {
	c.t.Helper()
	fsm := &logFSM{}
	n, err := newNode(nodeConfig{
		id: id, peers: c.ids, storage: c.storages[id], fsm: fsm, transport: c.net.Endpoint(id),
		tick: testTick, electionTicks: testElectionTicks, heartbeatTicks: 1,
		snapshotEntries: c.snapN, catchUpEntries: c.snapN / 2,
		maxSizePerMsg: 1 << 20, maxInflight: 256, logger: testLogger(),
	})
	if err != nil {
		c.t.Fatalf("node %d: %v", id, err)
	}
	if err := n.start(); err != nil {
		c.t.Fatalf("node %d start: %v", id, err)
	}
	c.nodes[id] = n
	c.fsms[id] = fsm
}

func (c *nodeCluster) stop(id uint64) {
	n := c.nodes[id]
	if n == nil {
		return
	}
	n.Stop()
	n.cfg.transport.Stop()
	delete(c.nodes, id)
}

// leader waits until the running nodes agree on one leader that is ready
// to decide, and returns it.
func (c *nodeCluster) leader(exclude ...uint64) uint64 {
	c.t.Helper()
	return c.leaderAmong(nil, exclude...)
}

// leaderAmong is leader restricted to the nodes in among (nil = all).
func (c *nodeCluster) leaderAmong(among []uint64, exclude ...uint64) uint64 {
	c.t.Helper()
	var last uint64
	ok := waitFor(testWait, func() bool {
		var lead uint64
		for id, n := range c.nodes {
			if among != nil && !slices.Contains(among, id) {
				continue
			}
			if n.isLeaderReady() {
				lead = id
			}
		}
		if lead == 0 {
			return false
		}
		for _, x := range exclude {
			if x == lead {
				return false
			}
		}
		for id, n := range c.nodes {
			if among != nil && !slices.Contains(among, id) {
				continue
			}
			if n.leader.Load() != lead {
				return false
			}
		}
		last = lead
		return true
	})
	if !ok {
		c.t.Fatalf("no leader within %v", testWait)
	}
	return last
}

// propose proposes on the current leader, retrying through leader changes.
func (c *nodeCluster) propose(payload string) uint64 {
	c.t.Helper()
	deadline := time.Now().Add(testWait)
	for time.Now().Before(deadline) {
		lead := c.leader()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		idx, err := c.nodes[lead].Propose(ctx, []byte(payload))
		cancel()
		if err == nil {
			return idx
		}
	}
	c.t.Fatalf("propose %q: no success within %v", payload, testWait)
	return 0
}

// waitFor polls cond every few milliseconds until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
